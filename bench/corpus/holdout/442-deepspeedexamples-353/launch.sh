python train.py --actor-zero-stage 3 --actor-model 110m --reward-zero-stage 3 --reward-model 110m --deployment-type single_node
