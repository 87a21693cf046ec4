torch.cuda.set_device(local_rank)
dist.init_process_group(
    backend='nccl',
    init_method=master_uri,
    world_size=world_size,
    rank=world_rank,
    timeout=timedelta(hours=5),  # 5 hrs
)
torch.cuda.synchronize()
