from transformers import AutoConfig, AutoModel
import torch
import numpy as np

# Load untrained GPT2 model
config = AutoConfig.from_pretrained("gpt2")
model = AutoModel.from_config(config)

# Access the weights of c_proj for attn and mlp
attn_c_proj_weights = [layer.attn.c_proj.weight for layer in model.h]
mlp_c_proj_weights = [layer.mlp.c_proj.weight for layer in model.h]

# Collect the c proj attention and mlp weights 
attn_layer_means = [item.mean().item() for item in attn_c_proj_weights]
attn_layer_stds = [item.std().item() for item in attn_c_proj_weights]
