from transformers import AutoModelForCausalLM, Trainer

model = AutoModelForCausalLM.from_pretrained(
    "google/gemma-2-9b",
    attn_implementation="flash_attention_2",
    use_cache=False,
    trust_remote_code=True,
    torch_dtype=torch.bfloat16,
)
