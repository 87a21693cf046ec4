"""A ZeRO-3 fine-tune whose DeepSpeed config is a dict built from module constants."""
import deepspeed
from transformers import AutoModelForCausalLM

MICRO_BATCH = 2
ZERO_STAGE = 3
LR = 2e-5
CLIP = 1.0

ds_config = {
    "train_micro_batch_size_per_gpu": MICRO_BATCH,
    "gradient_accumulation_steps": 8,
    "gradient_clipping": CLIP,
    "zero_optimization": {"stage": ZERO_STAGE, "overlap_comm": True},
    "bf16": {"enabled": True},
    "optimizer": {"type": "AdamW", "params": {"lr": LR, "betas": [0.9, 0.95]}},
}

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2-7B")
engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
