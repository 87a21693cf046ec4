llamafactory-cli train examples/train_lora/train_70b_qlora.yaml
