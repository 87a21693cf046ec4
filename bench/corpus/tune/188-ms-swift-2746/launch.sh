CUDA_VISIBLE_DEVICES=4,5,6,7 \
NPROC_PER_NODE=4 \
MAX_PIXELS=602112 \
swift sft \
    --model /apdcephfs_qy3/share_300998916/okingli/.cache/huggingface/hub/models--OpenGVLab--InternVL2_5-1B/snapshots/4dcf9845f6a6d8d6c4b188aae707a265cfbe4be5/ \
    --train_type lora \
    --num_train_epochs 1 \
    --per_device_train_batch_size 1 \
    --learning_rate 1e-4 \
    --lora_rank 8 \
    --lora_alpha 32 \
    --gradient_accumulation_steps 16 \
    --eval_steps 100 \
    --save_steps 100 \
    --save_total_limit 2 \
    --max_length 2048 \
    --logging_steps 5 \
    --truncation_strategy "left" \
