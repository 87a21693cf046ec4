model_name = "/xxx/colpali-v1.1"
model = ColPali.from_pretrained("/xxx/colpaligemma-3b-mix-448-base", torch_dtype=torch.bfloat16, device_map="cuda").eval()
model.load_adapter(model_name)
model = model.eval()

model.save_pretrained("./merge_model")

tokenizer = AutoTokenizer.from_pretrained(model_name)
tokenizer.save_pretrained("./merge_model")
