CUDA_VISIBLE_DEVICES=0 python prompt_eval.py \
    --model_name_or_path model_name_or_path \
    --finetuned_model_name_or_path finetuned_model_name_or_path \
    --test_file test_file_name_or_path
