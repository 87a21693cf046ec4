python train.py config/finetune_shakespeare.py --bias=True
