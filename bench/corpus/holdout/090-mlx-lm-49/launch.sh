mlx_lm.lora \
    --model mlx-community/Mistral-7B-Instruct-v0.3 \
    --train \
    --batch-size 4 \
    --num-layers 16 \
    --data mlx-community/wikisql
