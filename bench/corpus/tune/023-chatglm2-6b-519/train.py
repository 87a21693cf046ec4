# 模型加载代码
model = AutoModel.from_pretrained(pre_model_path, trust_remote_code=True, torch_dtype=torch.float32).cuda()
model.supports_gradient_checkpointing = True
model.gradient_checkpointing_enable()
model.enable_input_require_grads()
model.config.use_cache = False

# lora设置代码
peft_config = LoraConfig(
        task_type=task_type,
        inference_mode=False,
        r=r,
        lora_alpha=lora_alpha,
        lora_dropout=lora_dropout
    )
