swift sft \
 --model qwen/Qwen2.5-14B \
 --model_type qwen2_5 \
 ...
