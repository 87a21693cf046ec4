accelerate launch --config_file fsdp.yaml --mixed_precision bf16 train.py \
  --learning_rate=5e-6 --lr_scheduler_type=cosine --warmup_ratio=0.03 \
  --max_grad_norm 0.0 --attn_implementation flash_attention_2
