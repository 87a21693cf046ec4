uv run python examples/conversion/create_hf_toy_model.py \
        --hf-model-id Qwen/Qwen3-Next-80B-A3B-Instruct \
        --output-dir /tmp/qwen3_toy \
        --num-hidden-layers 2 \
        --num-experts 4

uv run python -m torch.distributed.run --nproc_per_node=2 examples/conversion/compare_hf_and_megatron/compare.py \
        --hf_model_path "/tmp/qwen3_toy" \
        --prompt "Hello, how are you?" --tp 2
