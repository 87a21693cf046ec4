python -m mlx_lm.lora \
  --train \
  --model mistralai/Mixtral-8x7B-v0.1\
  --data /Users/macstudiosct/projects/finetune_mlx/finetuning_data/data \
  --batch-size 3 \
  --lora-layers 20 \
  --iters 5000 --max-seq-length 4096
