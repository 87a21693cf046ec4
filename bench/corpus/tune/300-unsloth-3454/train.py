from unsloth import FastModel
import torch
from unsloth.chat_templates import get_chat_template
from datasets import load_dataset
from transformers import TextStreamer
import re

max_seq_length = 2048

model, tokenizer = FastModel.from_pretrained(
    model_name = "yzeng58/gemma-3-270m-it-cot-format",
    max_seq_length = max_seq_length, # Choose any for long context!
    load_in_4bit = False,  # 4 bit quantization to reduce memory
    load_in_8bit = False, # [NEW!] A bit more accurate, uses 2x memory
    full_finetuning = False, # [NEW!] We have full finetuning now!
    # token = "hf_...", # use one if using gated models
    force_download=True, # reload from remote instead of cached weights
)

tokenizer = get_chat_template(
    tokenizer,
    chat_template = "gemma3",
)

dataset = load_dataset("EleutherAI/arithmetic", revision="refs/convert/parquet", split = "validation")

def convert_to_chatml(example):
    system_prompt = "Please answer the arithmetic question with the final answer at the end of the answer."
