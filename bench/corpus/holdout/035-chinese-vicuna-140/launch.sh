python generate.py     --model_path 'decapoda-research/llama-7b-hf'    --lora_path 'Chinese-Vicuna/Chinese-Vicuna-lora-7b-belle-and-guanaco'    --use_local '0'    --use_typewriter '1'
python finetune.py --data_path './sample/merge_sample.json' --output_path './loar-v/' --model_path 'decapoda-research/llama-7b-hf' --eval_steps 200 --save_steps 200 --test_size 1
python generate.py     --model_path 'decapoda-research/llama-7b-hf'    --lora_path './loar-v/'     --use_local '0'     --use_typewriter '1'
