torchrun --nproc-per-node 8 examples/llm_finetune/finetune.py
