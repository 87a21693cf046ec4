# For fine-tuning,
python demos/multi_turn.py \
--llama_config llama/llama-2-7b/params.json --tokenizer_path /llama/tokenizer.model --pretrained_path /llama/llama-2-7b

# For demo,
python demos/multi_turn.py \
--llama_config llama/llama-2-7b/params.json --tokenizer_path /llama/tokenizer.model \
--pretrained_path /llama2/output_dir/finetune/sg/dialog_sharegpt/epoch3
