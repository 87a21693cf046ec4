deepspeed --num_gpus=8 src/train.py \
    --model_name_or_path ./baichuan2-7b-base \
    --per_device_train_batch_size 4 \
    --gradient_accumulation_steps 2 \
    --warmup_steps 0 \
    --learning_rate 2e-5 \
    --gradient_checkpointing True \
    --fp16 True \
    --deepspeed src/configs/deepspeed_config.json
