torchrun --nnodes 1 --nproc_per_node 2 run_clm_pt_with_peft.py
