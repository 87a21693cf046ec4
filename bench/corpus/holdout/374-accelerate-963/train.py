from accelerate import Accelerator
from transformers import (
    get_cosine_schedule_with_warmup,
)
import torch
