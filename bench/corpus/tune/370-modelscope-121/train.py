cfg.train.dataloader = {
    "batch_size_per_gpu": 10,
    "workers_per_gpu": 1,
    "shuffle": True
}
