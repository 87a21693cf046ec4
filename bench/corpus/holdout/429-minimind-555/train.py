# -*- encoding: utf-8 -*-
# @Time    :   2025/11/25 20:05:50
# @File    :   sft_code.py
# @Author  :   ciaoyizhen
# @Contact :   yizhen.ciao@gmail.com
# @Function:   
import os
from dataclasses import dataclass
from transformers import HfArgumentParser, TrainingArguments, AutoTokenizer, AutoModelForCausalLM, Trainer, DataCollatorForSeq2Seq
from datasets import load_dataset
from setproctitle import setproctitle

proc_title = os.environ.get("PROC_TITLE", None)
if proc_title:
    setproctitle(proc_title)


@dataclass
class CustomTrainingArguments(TrainingArguments):
    checkpoint: str = "/data1/caoyizhen/caoyizhen/research/minimind_project/output/MiniMind_pretrain/checkpoint-88320"
    train_datasets: str = "/data1/caoyizhen/caoyizhen/research/minimind_project/data/sft_mini_512.jsonl"
    max_seq_len: int = 2048

    # TrainerArgument
    output_dir: str = "output/MiniMind_stf"
    report_to: str = "swanlab"
    save_total_limit:int = 3
    run_name = "sft_train"

def data_process(examples):
    conversations = examples["conversations"]
    input_ids_list = []
    attention_mask_list = []
    token_type_ids_list = []
    labels_list = []
    for conversation in conversations:
        input_text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=False)  # 训练数据不需要add_generation_prompt
        input_dict = tokenizer(
