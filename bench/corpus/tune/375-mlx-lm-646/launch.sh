mlx_lm.fuse --model openai/gpt-oss-20b
