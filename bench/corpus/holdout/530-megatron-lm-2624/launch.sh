torchrun --nproc_per_node=2 compare.py --hf_model_path /workspace/my-tiny-qwen/ --prompt "а а а а а а а а" --enable_debug_hooks --tp 2
