swift export 
--ckpt_dir llama2-7b-chat/v1-20240303-122630/checkpoint-6250  \
--merge_lora true \
--model_type llama2-7b-chat \
--model_cache_dir llama2-7b-chat/modelscope/Llama-2-7b-chat-ms
