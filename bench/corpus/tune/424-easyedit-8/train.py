hparams = MENDTrainingHparams.from_hparams("./hparams/TRAINING/MEND/llama-7b.yaml")
    train_ds = ZsreDataset('./Data/zsre/zsre_mend_train_10000.json', config=hparams)
    eval_ds = ZsreDataset('./Data/zsre/zsre_mend_eval.json', config=hparams)
    trainer = EditTrainer(
        config=hparams,
        train_set=train_ds,
        val_set=eval_ds
    )
    trainer.run()
