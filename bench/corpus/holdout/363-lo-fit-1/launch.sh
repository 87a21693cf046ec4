model_name=Llama-2-7b-hf
echo $HUGGINGFACE_CACHE$model_name
task="clutrr";
seed=42;
python lofit_trainer.py \
    --task $task \
    --base_model_name $HUGGINGFACE_CACHE$model_name \
    --apply_chat_template False \
    --ft_method lofit \
    --lofit_component A \
    --use_topk_heads 160 \
    --lr 5e-4 \
    --train_batch 8 \
    --num_epoch 5 \
    --output_dir "./finetuned_checkpoints/${task}/${model_name}_${task}_Aonly_seed${seed}"\
    --run_mode train \
    --output_file_name "./finetuned_outputs/${task}/${model_name}_${task}_Aonly_seed${seed}"\
    --applied_module attention \
    --save_strategy no \
    --l1_lambda 5e-3 \
    --eval_batch 32 \
    --train_size 300 \
    --seed $seed \
