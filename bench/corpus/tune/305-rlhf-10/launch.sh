TRAIN_FILENAME="dev_data_external_v1.jsonl"

deepspeed --num_gpus 2 train_reward.py \
  --data_dir ' ' \
  --output_dir 'RLHF/output'  \
  --model_name_or_path 'chatglm-6b' \
  --tokenizer_path 'chatglm-6b' \
  --max_length 512 \
  --logging_steps 1 \
  --save_steps 100 \
  --learning_rate 1e-6 \
  --do_train \
  --train_filename $TRAIN_FILENAME \
  --train_batch_size 8 \
  --gradient_accumulation_steps 4 \
  --num_epochs 5 \
  --gradient_checkpointing \
  --deepspeed_config "stage-3.json"
