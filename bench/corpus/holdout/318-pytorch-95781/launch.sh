> git clone https://github.com/oddlama/nanoGPT_nan
> cd nanoGPT_nan
> python train.py config/nan.py --allow_fused=True
