tokenizer = dict(
    type=AutoTokenizer.from_pretrained,
    pretrained_model_name_or_path=new_tokens,
    trust_remote_code=True,
    padding_side='right')

model = dict(
    type=SupervisedFinetune,
    use_varlen_attn=use_varlen_attn,
    llm=dict(
        type=AutoModelForCausalLM.from_pretrained,
        pretrained_model_name_or_path=pretrained_model_name_or_path,
        trust_remote_code=True,
        torch_dtype=torch.float16),
    tokenizer=tokenizer)
