inf_config = {
    "replace_with_kernel_inject": False,
    "dtype": torch.bfloat16,
    "replace_method": "auto",
    "enable_cuda_graph": False,
    "tensor_parallel": {"tp_size": 8},
}
pipe.model = deepspeed.init_inference(pipe.model,
                                config=inf_config,
                                dtype=torch.bfloat16,
                                replace_with_kernel_inject=False,
                                max_tokens=100,
                                )
