from mlx_tune import FastLanguageModel, SFTTrainer


max_seq_length = 2048  # 可以自定义任意窗口长度，已根据RoPE编码自动伸缩模型窗口尺寸了。
dtype = None  # 设置为None自动获取。目前 Float16 支持GPU类型：Tesla T4, V100； Bfloat16 支持GPU类型： Ampere+
load_in_4bit = True  # 使用4bit量化以减少内存使用。可以设置为False。
