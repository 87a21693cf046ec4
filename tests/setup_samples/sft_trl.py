import torch
from datasets import load_dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

model = AutoModelForCausalLM.from_pretrained(
    "Qwen/Qwen2-7B", torch_dtype=torch.bfloat16, attn_implementation="flash_attention_2"
)
tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen2-7B")
peft_config = LoraConfig(r=64, lora_alpha=16, lora_dropout=0.05, task_type="CAUSAL_LM")
args = SFTConfig(
    output_dir="out",
    learning_rate=2e-4,
    per_device_train_batch_size=2,
    gradient_accumulation_steps=16,
    max_seq_length=4096,
    bf16=True,
    warmup_steps=100,
    max_grad_norm=1.0,
    adam_beta2=0.95,
    gradient_checkpointing=True,
)
trainer = SFTTrainer(model=model, args=args, train_dataset=load_dataset("json", data_files="d.jsonl")["train"],
                     peft_config=peft_config)
trainer.train()
