import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

model_id = "google/gemma-4-12B-it"
tok = AutoTokenizer.from_pretrained(model_id)
model = AutoModelForCausalLM.from_pretrained(
    model_id, torch_dtype=torch.bfloat16, device_map="cpu"
).eval()

prompt = "The capital of France is"
ids = tok(prompt, return_tensors="pt")

# 1) generation collapses to a repeated token
out = model.generate(**ids, max_new_tokens=12, do_sample=False)
print(tok.decode(out[0], skip_special_tokens=True))
# -> "The capital of France is111111111111"
