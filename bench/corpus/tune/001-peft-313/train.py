model.enable_input_require_grads()
model.gradient_checkpointing_enable()
