SOURCE_CKPT_PATH=/shared-data0/llm-models/llama3_8b/
TARGET_CKPT_PATH=/shared-data0/weights/llama3-8b-tp1pp2/
TP=1
PP=2
MN=llama3-8b
EXTRA_VOCAB_SIZE=0  # 词表扩充大小，随机初始化
mg2hf=false

if [ $mg2hf = true ]; then
    do_options="
                --convert_checkpoint_from_megatron_to_transformers
    "
elif [ $mg2hf = false ]; then
    do_options=""
fi

export PYTHONPATH=$PYTHONPATH:${MEGATRON_PATH}:${MEGATRON_PATH}/Megatron-LM-231007

python hf2megatron.py \
--load_path ${SOURCE_CKPT_PATH} \
--save_path ${TARGET_CKPT_PATH} \
--target_params_dtype fp16 \
--megatron-path ${MEGATRON_PATH} \
--target_tensor_model_parallel_size ${TP} \
--target_pipeline_model_parallel_size ${PP} \
--model_name ${MN} \
--extra_num_vocabs ${EXTRA_VOCAB_SIZE} \
${do_options}
