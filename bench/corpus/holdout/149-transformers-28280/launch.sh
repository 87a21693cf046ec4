deepspeed  --include localhost:2,3 --master_port 61000 llava/train/train_mem.py \
    --lora_enable True --lora_r 128 --lora_alpha 256 --mm_projector_lr 2e-5 \
    --deepspeed ./scripts/zero2.json \
    --model_name_or_path /drive/models/llava-v1.5-13b \
    --version v1 \
    --data_path ./playgr
