python3 -m mlx_lm.generate --model ../mlx_models/Mixtral-8x22B-Instruct-v0.1-4bit --prompt "Hi! Tell a long story"
