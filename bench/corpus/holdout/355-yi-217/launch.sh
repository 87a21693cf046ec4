python -m vllm.entrypoints.apiserver --model /media/data/Yi-34B-Chat-4bit --tensor-parallel-size 4 --quantization awq
