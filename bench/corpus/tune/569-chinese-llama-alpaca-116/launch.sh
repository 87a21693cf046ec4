python scripts/merge_llama_with_chinese_lora_to_hf.py \
    --base_model decapoda-research/llama-13b-hf \
    --lora_model ziqingyang/chinese-alpaca-lora-13b \
    --output_dir chinese-alpaca-lora-13b
