python scripts/vllm_infer.py --model_name_or_path /playground/Qwen2.5-VL-7B --adapter_name_or_path /playground/model_image
