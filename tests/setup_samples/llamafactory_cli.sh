CUDA_VISIBLE_DEVICES=0,1 llamafactory-cli train examples/train_lora/llama3_lora_sft.yaml \
    learning_rate=1e-4 cutoff_len=4096 finetuning_type=lora lora_rank=16
