CUDA_VISIBLE_DEVICES=3,4 swift export \
    --ckpt_dir "output/internvl2-40b}/v2-checkpoint-6300" \
    --model_id_or_path "/home/pretrained_models/OpenGVLab/InternVL2-40B" \
    --merge_lora true
