CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6 torchrun --nnodes=1 --nproc_per_node=7 train.py --config ./configs/my_7B_sft.py --launcher "torch" 2>&1 | tee -i "$src/train_log_$current_date_time.txt"
