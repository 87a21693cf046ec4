inputs = prompt
be = tokenizer(inputs, return_tensors='pt', padding=True)
input_ids = be.input_ids.to(model.device)
attention_mask = be.attention_mask
attention_mask = attention_mask.to(model.device)
gen_kwargs = {
    "max_length": max_length,
    "do_sample": False,
    "repetition_penalty": 1.0,
    "num_return_sequences" :1
}
output_ids = model.generate(input_ids=input_ids, attention_mask=attention_mask, **gen_kwargs)
