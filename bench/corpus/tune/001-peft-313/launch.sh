accelerate launch main.py --args
