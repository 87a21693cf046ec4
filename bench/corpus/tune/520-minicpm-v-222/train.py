model = AutoPeftModelForCausalLM.from_pretrained(
    # path to the output directory
    model_path,
    device_map="auto",
    trust_remote_code=True
).eval()

torch.manual_seed(0)
tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=True)

im_64 = '/6f8028485ed8fcd8.jpg'

# First round chat 
msgs = [{"role": "user", "content": "what is the date of the workshop? Answer the question with detailed explanation."}]


imagefile = Image.open(im_64).convert('RGB')
answer = model.chat(image=imagefile, msgs=msgs, tokenizer=tokenizer,
                         sampling=True,temperature=0.7, stream=True)
print(answer)
