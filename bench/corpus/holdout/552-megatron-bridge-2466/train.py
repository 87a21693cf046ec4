def compare_models_one_step(args) -> None:
    """Compare 1-step generation between HF and Megatron models with debugging.

    Args:
        args: Parsed command line arguments
    """
# ==========================================================
# Skip the lines
# ==========================================================
    with torch.no_grad():
        position_ids = (
            torch.arange(input_ids.size(1), dtype=torch.long, device=input_ids.device)
            .unsqueeze(0)
            .expand_as(input_ids)
        )
        attention_mask = torch.ones_like(input_ids, dtype=torch.bool) # # <--- Here is the issue

        fwd_bwd_function = get_forward_backward_func()
        iterator = SingleBatchIterator(input_ids, position_ids, attention_mask, pixel_values, image_grid_thw)
