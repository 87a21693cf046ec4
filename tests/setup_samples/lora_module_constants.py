"""A LoRA fine-tune whose settings are module constants passed on by name (the style of many
research repositories' finetune.py)."""
import torch
from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

BASE_MODEL = "meta-llama/Llama-2-7b-hf"
MICRO_BATCH_SIZE = 4
BATCH_SIZE = 128                      # the global batch: reached through accumulation below
GRADIENT_ACCUMULATION_STEPS = BATCH_SIZE // MICRO_BATCH_SIZE
EPOCHS = 3
LEARNING_RATE = 3e-4
CUTOFF_LEN = 512
LORA_R = 16
LORA_ALPHA = 32
LORA_DROPOUT = 0.05
load_in_4bit = True

tokenizer = AutoTokenizer.from_pretrained(BASE_MODEL)
model = AutoModelForCausalLM.from_pretrained(BASE_MODEL, load_in_4bit=load_in_4bit, device_map="auto")
model = prepare_model_for_kbit_training(model)
model = get_peft_model(model, LoraConfig(r=LORA_R, lora_alpha=LORA_ALPHA, lora_dropout=LORA_DROPOUT,
                                         target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))

args = TrainingArguments(
    output_dir="lora-out",
    per_device_train_batch_size=MICRO_BATCH_SIZE,
    gradient_accumulation_steps=GRADIENT_ACCUMULATION_STEPS,
    num_train_epochs=EPOCHS,
    learning_rate=LEARNING_RATE,
    fp16=True,
    logging_steps=10,
)
