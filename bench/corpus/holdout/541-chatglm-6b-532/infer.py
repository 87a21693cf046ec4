from transformers import AutoTokenizer, AutoModel
tokenizer = AutoTokenizer.from_pretrained("/content/ChatGLM-6B/ptuning/output/chattm/checkpoint-50", trust_remote_code=True)
model = AutoModel.from_pretrained("/content/ChatGLM-6B/ptuning/output/chattm/checkpoint-50", trust_remote_code=True).half().cuda()
model = model.eval()
response, history = model.chat(tokenizer, "你好", history=[])
print(response)
