accelerate launch --num_processes=4 main.py --langs cpp cuda --train_mode mlm aer bt ft eval --dataset_format tok
