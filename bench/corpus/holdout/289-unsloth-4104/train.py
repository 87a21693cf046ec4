model, tokenizer = FastLanguageModel.from_pretrained(
    unsloth/Qwen3-1.7B-unsloth-bnb-4bit,
    max_seq_length = 10_000,
    load_in_4bit=True,
    fast_inference = False
)

model = FastLanguageModel.get_peft_model(
  model,
  r = 4,
  lora_alpha = 8,
  target_modules = ["q_proj","v_proj"],
  use_gradient_checkpointing = True
  random_state = 1235,
  bias = "none"
