"""Facts from the user's words and pasted text (troubleshoot/evidence): values, phrases,
negations, error signatures; and the extractor's robustness on any input."""
from __future__ import annotations

import json
import marshal

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from troubleshoot.cli import main
from troubleshoot.evidence import extract
from troubleshoot.evidence.patterns import linear_problem, table
from troubleshoot.knowledge import load


@pytest.fixture(scope="module")
def kb():
    return load()


def facts(kb, text):
    return {name: hit.value for name, hit in extract(kb, text).facts.items()}


VALUES = [
    ("lr=3e-4", {"train.lr": 3e-4}),
    ("learning_rate: 2e-5", {"train.lr": 2e-5}),
    ("I use a learning rate of 1e-4 with cosine decay", {"train.lr": 1e-4}),
    ("学习率设为5e-5", {"train.lr": 5e-5}),
    ("python train.py --fp16 --lr 1e-4", {"train.precision": "fp16", "train.lr": 1e-4}),
    ("TrainingArguments(bf16=True, per_device_train_batch_size=8)", {"train.precision": "bf16", "train.micro_batch_size": 8}),
    ("model = AutoModelForCausalLM.from_pretrained(p, torch_dtype=torch.float16)", {"model.dtype": "fp16"}),
    ("config: hidden_size 4096, num_layers 32", {"model.hidden_size": 4096, "model.num_layers": 32}),
    ("trainable params: 0 || all params: 6,738,415,616 || trainable%: 0.0", {"grads.trainable_fraction": 0}),
    ("{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 2e-05, 'epoch': 0.01}", {"logs.loss_zero": True, "logs.nan": True}),
    ("CUDA out of memory during evaluation, training itself is fine", {"logs.oom_phase": "eval"}),
    ("评估时显存OOM", {"logs.oom_phase": "eval"}),
    ("the loss spikes right after resuming from the checkpoint", {"lossspike.after_resume": True}),
    ("with gradient clipping 1.0 and zero stage 3", {"train.grad_clip": 1.0, "train.zero_stage": 3}),
    ("tokenizer.pad_token = tokenizer.eos_token", {"model.pad_is_eos": True}),
    ("continued pretraining of llama on our corpus", {"train.stage": "continued-pretraining"}),
    ("I train in float32 and the loss is still nan", {"train.precision": "fp32"}),
    ("llamafactory.model.adapter:103 >> Upcasting trainable params to float32.", {"train.precision": None}),
    ("DeepSpeed ZeRO3 detected, remaining trainable params in float32.", {"train.precision": None}),
    ("pretraining a 1B model from scratch, loss nan at step 7000", {"train.stage": "pretraining"}),
    ("we are training a GPT-2 from scratch", {"train.stage": "pretraining"}),
    ("在预训练阶段loss突然变成nan", {"train.stage": "pretraining"}),
    ("用预训练模型做lora", {"train.stage": None}),       # a pretrained model, not pretraining
    ("the pretrain model weights load fine", {"train.stage": None}),
    ("用LoRA微调Qwen", {"train.finetune_method": "lora"}),
    ("grad_norm:nan loss:0", {"logs.loss_zero": True, "logs.loss_zero_grad_nan": True}),
    ("训练时loss全为0", {"logs.loss_zero": True}),
    ("大概20步以后loss就开始为nan了", {"logs.nan": True}),
    ("the loss is 0.0012 after one epoch", {"logs.loss_zero": None}),
    ("Fine-tuning Mistral with trl v0.7.2 gives CUDA out of memory", {"logs.oom_phase": "train"}),
    ("training runs out of memory; evaluation runs out of memory too", {"logs.oom_phase": None}),
    ("It dies when training on 25M sentences. Memory keeps growing, I guess out of memory", {"logs.oom_phase": None}),
    ("LlamaForCausalLM.from_pretrained with ZeRO-3 uses so much host RAM it goes OOM", {"logs.oom_phase": None}),
    ("pretraining a 1B model runs out of memory", {"logs.oom_phase": "train"}),
    ("if I remove compute_metrics from the trainer it works", {"evaloom.accumulates_logits": True}),
    ("grad_norm is nan with deepspeed==0.13.5 but ok with deepspeed==0.10.2", {"dist.version_change_fixes": True}),
    ("reverting trl back to v0.7.1 fixes it", {"dist.version_change_fixes": True}),
    ("after upgrading transformers to 4.46 the loss no longer decreases", {"train.after_upgrade": True}),
    ("Since updating to the latest deepspeed, grad_norm is nan", {"train.after_upgrade": True}),
    ("it worked fine with the previous version", {"train.after_upgrade": True}),
    ("training broke after the recent update", {"train.after_upgrade": True}),
    ("升级transformers到4.45之后loss不下降", {"train.after_upgrade": True}),
    ("Very high loss with DeepSpeed CPU offload for versions>=4.36.0", {"train.after_upgrade": True}),
    ("the loss is wrong in 4.36 and later, 4.35 is fine", {"train.after_upgrade": True}),
    ("用最新的Megatron-LM版本运行会报错", {"train.after_upgrade": True}),
    ("我用的是拉的最新代码", {"train.after_upgrade": True}),
    ("pip install transformers>=4.36 accelerate", {"train.after_upgrade": None}),
    ("trained for 4.36 epochs", {"train.after_upgrade": None}),
    ("旧版本正常，新版本loss为0", {"train.after_upgrade": True}),
    ("I updated the learning rate to 1e-5 and it still diverges", {"train.after_upgrade": None}),
    ("after updating the weights the loss drops", {"train.after_upgrade": None}),
    ("ZeRO-3 training hangs when saving the final model", {"export.hang_at_save": True, "train.zero_stage": 3}),
    ("训练结束保存阶段卡住", {"export.hang_at_save": True}),
    ("if local_rank == 0:\n    model.save_pretrained(out)", {"export.save_rank0_only": True}),
    ("if accelerator.is_main_process:\n    trainer.save_model(output_dir)", {"export.save_rank0_only": True}),
    ("we save the model only on rank 0 and it hangs", {"export.save_rank0_only": True}),
    ("只在主进程保存模型，然后卡住", {"export.save_rank0_only": True}),
    ("if rank == 0:\n    print(loss)", {"export.save_rank0_only": None}),
    ("the saved file is so small, about 300k, while the model is 16G", {"export.saved_size_tiny": True}),
    ("a model of 16G trained with a small 300k-token dataset", {"export.saved_size_tiny": None}),
    ("DAPO training: the accuracy reward stays 0", {"train.pref.algorithm": "grpo"}),
    ("after the save, resume silently changed the weights", {"export.hang_at_save": None}),
    ("merge_and_unload() on the 4-bit base gives different outputs", {"export.merged_into_quantized": True}),
    ("用GPTQ-Int4做了qlora训练后，如何合并lora", {"export.merged_into_quantized": True}),
    ("fsdp_state_dict_type: SHARDED_STATE_DICT", {"export.sharded_state_dict": True}),
    ("rewards/chosen is decreasing while rewards/rejected falls faster", {"logs.pref.chosen_logps_falling": True}),
    ("DPO on Llama 3", {"train.pref.algorithm": "dpo"}),
    ("rows that received a left pad token return NaN; a row that attends to nothing", {"data.padding_side": "left", "forward.mask.fully_masked_nan": True}),
    ("the loss drops to 0.8, then increases to 6.2", {"logs.divergence": True}),
    ("weights stored in bf16 with no master copy", {"train.master_weights_fp32": False}),
    ("pad_token == eos_token, so the EOS gets masked", {"model.pad_is_eos": True, "data.eos.masked": True}),
    ("it never produces the EOS token and stops at max_new_tokens", {"repetition.hits_max_tokens": True}),
    ("after converting to GGUF the model outputs gibberish", {"export.converted_bad_hf_ok": True}),
    ("tie_word_embeddings is true but lm_head was not physically tied", {"weights.tie_broken": True}),
    ("lowering the learning rate to 1e-5 fixed it", {"nanloss.lower_lr_fixes": True}),
    ("the NaN went away after I reduced the lr", {"nanloss.lower_lr_fixes": True}),
    ("把学习率调小以后就正常了", {"nanloss.lower_lr_fixes": True}),
    ("lowering the learning rate did not help", {"nanloss.lower_lr_fixes": False}),
    ("调小学习率后问题没有解决", {"nanloss.lower_lr_fixes": False}),
    ("switching to eager attention fixed it", {"zeroloss.eager_fixes": True}),
    ("disabling flash attention solved the problem", {"zeroloss.eager_fixes": True}),
    ("it works fine with attn_implementation='eager'", {"zeroloss.eager_fixes": True}),
    ("关闭flash attention后loss正常了", {"zeroloss.eager_fixes": True}),
    ("I tried attn_implementation=eager but the loss is still 0", {"zeroloss.eager_fixes": None}),
    ("fp16 gives nan but it trains fine in bf16", {"fp16overflow.fp32_ok": True}),
    ("换成bf16就正常了", {"fp16overflow.fp32_ok": True}),
    ("it doesn't work with bf16 either", {"fp16overflow.fp32_ok": None}),
    ("single GPU works, but with 8 GPUs it hangs at the first all_reduce",
     {"system.single_gpu_ok": True, "system.fails_at_init": True}),
    ("单卡正常，多卡每次都卡在同一个step", {"system.single_gpu_ok": True, "system.fails_at_fixed_point": True}),
    ("one GPU shows ERR! in nvidia-smi", {"system.single_gpu_ok": None}),
    ("it always hangs on the same step of epoch 2", {"system.fails_at_fixed_point": True}),
    ("the lora weights don't change at all, lora_B is still all zeros", {"nograd.weights_changed": False}),
    ("训练后lora参数没有更新", {"nograd.weights_changed": False}),
    ("{'loss': 1.93, 'grad_norm': 0.0, 'learning_rate': 0.0, 'epoch': 0.02}", {"nograd.logged_lr_zero": True}),
    ("{'loss': 1.93, 'learning_rate': 0.0002, 'epoch': 0.02}", {"nograd.logged_lr_zero": None}),
    ("the loss keeps oscillating between 2 and 3", {"lossplateau.oscillating": True}),
    ("预训练loss一直震荡", {"lossplateau.oscillating": True}),
    ("pretraining loss stuck at 10.8 for 2000 steps", {"lossplateau.stuck_at_ln_vocab": True}),
    ("loss stuck at 2.3 for 2000 steps", {"lossplateau.stuck_at_ln_vocab": None}),
    ("sample_packing: true", {"mask.packed_sequences": True}),
    ("we train without sequence packing", {"mask.packed_sequences": False}),
    ("generation uses greedy decoding with max_new_tokens=512", {"repetition.greedy_decoding": True}),
    ("the DPO loss is stuck at 0.693 for the whole run", {"logs.pref.loss_stuck": True}),
    ("{'loss': 0.6931, 'rewards/chosen': 0.0, 'epoch': 0.0}", {"logs.pref.loss_stuck": None}),
    ("objective/kl goes negative after 50 steps", {"logs.pref.kl_negative": True}),
    ("PPO训练KL散度为负", {"logs.pref.kl_negative": True}),
    ("the completion length keeps growing during GRPO", {"logs.pref.length_growing": True}),
    ("GRPO训练回答越来越长", {"logs.pref.length_growing": True}),
    ("the output folder only contains adapter_model.safetensors", {"export.only_adapter_files": True}),
    ("pytorch_model.bin is only 610K after saving", {"export.saved_size_tiny": True}),
    ("zero3训练导出的模型只有几KB", {"export.saved_size_tiny": True}),
    ("pytorch_model.bin is 13.5 GB", {"export.saved_size_tiny": None}),
    ("every saved weight has shape torch.Size([0])", {"weights.empty_tensors": 1}),
    ("before merging the adapter works great, after merging it outputs garbage", {"export.adapter_ok_merged_bad": True}),
    ("合并前效果很好，合并后测试效果很差", {"export.adapter_ok_merged_bad": True}),
    ("eval loss keeps increasing while the train loss goes down", {"logs.eval_loss_rising": True}),
    ("验证集loss反而上升", {"logs.eval_loss_rising": True}),
    ("after step 300 the model weights became nan", {"weights.nonfinite": True}),
    ("there were NaN values in the labels of my dataset", {"data.has_nonfinite": True}),
    ("--predict_with_generate --per_device_eval_batch_size 32", {"evaloom.generates": True, "evaloom.eval_batch_size": 32}),
    ("fine-tuned only on our medical data, without general data", {"forgetting.replay_data": False}),
    ("没有混入通用数据，只用了领域数据", {"forgetting.replay_data": False}),
    ("--num_train_epochs 10", {"train.epochs": 10}),
    ("DPOConfig(beta=0.01, learning_rate=5e-7)", {"train.pref.beta": 0.01, "train.lr": 5e-7}),
    ("optimizer AdamW betas=(0.9, 0.95), adam_beta2=0.95", {"train.pref.beta": None}),
    ('"max_position_embeddings": 4096, "vocab_size": 32000', {"model.max_positions": 4096, "model.vocab_size": 32000}),
    ('"num_local_experts": 8, "num_experts_per_tok": 2', {"model.moe.num_experts": 8, "model.moe.top_k": 2}),
    ("--moe-router-dtype fp32 --fp8", {"moe.router_dtype": "fp32", "train.fp8": True}),
    ("--no-check-for-nan-in-loss-and-grad", {"train.nan_guard": False}),
    ("model = PeftModel.from_pretrained(base, 'out/checkpoint-500', is_trainable=False)", {"nograd.adapter_loaded_frozen": True}),
    ("PeftModel.from_pretrained(base, path, is_trainable=True)", {"nograd.adapter_loaded_frozen": False}),
    ("I added 3 new special tokens and called resize_token_embeddings", {"export.resized_embeddings": True}),
    ("我们扩充了词表然后做了增量预训练", {"export.resized_embeddings": True}),
    ("I forgot to add the EOS token to the targets", {"data.eos.present": False}),
    ("构建数据时output没有加eos", {"data.eos.present": False}),
    ("every target ends with the eos token", {"data.eos.present": None}),
    ("samples longer than cutoff_len get truncated, so the EOS is cut off", {"repetition.truncated_targets": True}),
    ("超过max_target_length的样本终止符被截断", {"repetition.truncated_targets": True}),
    ("inference uses a different prompt template at inference than in training", {"repetition.template_matches": False}),
    ("推理时没有使用chat template", {"repetition.template_matches": False}),
    ("the attention_mask is never passed to the model in my forward", {"mask.passed_to_model": False}),
    ("the pad token is the same as the eos token in this tokenizer", {"model.pad_is_eos": True}),
    ("I am using eos as pad token", {"model.pad_is_eos": True}),
    ("eos和pad token id 一样，是不是改错了", {"model.pad_is_eos": True}),
    ("pad和eos不一样", {"model.pad_is_eos": None}),
    ("DPO训练时，nll_loss一直为nan", {"logs.nan": True}),
    ("训练时loss没有出现nan，但是一直不下降", {"logs.nan": None}),
    ("get_peft_model, then trainable params: 0, loss does not go down", {"grads.trainable_fraction": 0}),
    ("trainable params: 4,194,304 || all params: 6,742,609,920 || trainable%: 0.0622", {"grads.trainable_fraction": None}),
    ("loss训练到一半变成nan", {"logs.nan": True}),
    ("{'eval_loss': nan, 'eval_runtime': 12.1}", {"logs.nan": True}),
    ("{'eval_loss': 1.52, 'eval_runtime': 12.1}", {"logs.nan": None}),
    ('model = AutoModelForCausalLM.from_pretrained("bigscience/bloom-1b1", load_in_8bit=True)  # training', {"logs.oom_phase": None}),
    ("训练时OOM了", {"logs.oom_phase": "train"}),
    ("为什么训练阶段的显存一直在往上涨？一会就 OOM 了", {"logs.oom_phase": "train"}),
    ("第一轮结束第二轮开始时会报OOM杀死进程", {"system.killed_signal9": True}),
    ("tokenize后只会在句子开头增加标签\\<s\\>，而不会在句子结尾增加标签\\</s\\>", {"data.eos.present": False}),
    ("Tokenizer只会添加bos标签<s>，不添加eos标签</s>", {"data.eos.present": False}),
    ("我们在每条数据后面添加了eos", {"data.eos.present": None}),
    ("总是会不停的输出直到达到最大长度", {"repetition.hits_max_tokens": True}),
    ("tune run eleuther_eval --config eleuther_evaluation.yaml runs out of memory", {"evaloom.generates": True}),
    ("eval OOM, batch size 1, seq len 4096", {"evaloom.eval_batch_size": 1}),
    ("评估的batch size设为2也会OOM", {"evaloom.eval_batch_size": 2}),
    ("在本仓库发现作者的save_model重写代码是一样的，用这种重写的save model也不会有config文件的生成",
     {"export.peft_state_dict_override": True}),
    ("the script overrides model.state_dict, and adapter_model.bin is 443 bytes", {"export.peft_state_dict_override": True}),
    ("I save with model.save_pretrained(output_dir)", {"export.peft_state_dict_override": None}),
    ("the training loss of models with loss_kwargs becomes very large once the gradient accumulation is enabled",
     {"lossplateau.loss_scales_with_ga": True}),
    ("开了梯度累积之后loss变大了很多", {"lossplateau.loss_scales_with_ga": True}),
    ("loss is lower with gradient accumulation, as expected", {"lossplateau.loss_scales_with_ga": None}),
    ("training gets stuck with multiple 4090 gpus, 3090 is fine", {"system.geforce40_multi_gpu": True}),
    ("双4090训练卡住不动", {"system.geforce40_multi_gpu": True}),
    ("deepspeed on 4090 x 2 hangs at init", {"system.geforce40_multi_gpu": True}),
    ("one RTX 4090, 24GB, CUDA out of memory", {"system.geforce40_multi_gpu": None}),
    ("batch 4 with seq 4090 tokens on 8 A100s", {"system.geforce40_multi_gpu": None}),
    ("dmesg shows the oom-killer chose python", {"system.killed_signal9": True}),
    ("显存OOM了，没有进程被杀", {"system.killed_signal9": None}),
    ("训练时一切正常，但是评估的时候显存不足 OOM", {"logs.oom_phase": "eval"}),
    ("看 loss 有点异常，loss 陡然就变成了 0", {"logs.loss_zero": True}),
    ("why do prob_eval(train)/chosen and rewards_eval(train)/chosen gradually decrease?", {"logs.pref.chosen_logps_falling": True}),
    ("rewards_train/chosen keeps increasing", {"logs.pref.chosen_logps_falling": None}),
    ("Loading checkpoint shards: 52%|█████▏    | 17/33\nKilled\n", {"system.killed_signal9": True}),
    ("进行chatglm2 ptuning时，sh train.sh超内存", {"system.killed_signal9": True}),
    ("训练时GPU内存不足", {"system.killed_signal9": None}),
    ("generate.py fails on `Loading checkpoint shards: 52%` with message `killed`.", {"system.killed_signal9": True}),
    ("显存不足，训练时 OOM", {"system.killed_signal9": None}),
    ("the process was not killed, it just hangs", {"system.killed_signal9": None}),
    ("lr_scheduler.step() is called on every micro-batch, so the learning rate decays far too fast",
     {"lossplateau.lr_schedule_off": True}),
    ("the learning rate decays slowly with cosine", {"lossplateau.lr_schedule_off": None}),
    ("fine-tuning the base model with the <|im_start|> chat template", {"train.base_model_chat_tokens": True}),
    ("model = AutoModelForCausalLM.from_pretrained(p, torch_dtype=torch.float16)\ntrainer = Trainer(args=TrainingArguments(fp16=True))",
     {"fp16overflow.params_loaded_fp16": True, "model.dtype": "fp16"}),
    ("def compute_loss(self, model, inputs, return_outputs=False):", {"zeroloss.custom_loss": True}),
    ("we compute the loss with our custom loss function", {"zeroloss.custom_loss": True, "nanloss.custom_math": True}),
    ("loss = -torch.log(torch.softmax(logits, dim=-1))", {"nanloss.custom_math": True}),
    ("I wrote my own attention implementation with a padding mask", {"mask.custom_attention": True}),
    ("converted the checkpoint from Megatron to HF with the official script", {"tp.converted_checkpoint": True}),
    ("megatron转hf之后输出乱码", {"tp.converted_checkpoint": True}),
    ("the eval loop runs under with torch.no_grad(): and model.eval()", {"evaloom.no_grad": True}),
    ("the eval loop runs without torch.no_grad()", {"evaloom.no_grad": False}),
    ("dmesg shows Xid errors on node 12 right before the NaN", {"nanloss.xid_errors": True, "lossspike.xid_near_spike": True}),
    ("no Xid errors in dmesg", {"nanloss.xid_errors": None}),
]


@pytest.mark.parametrize("text,expected", VALUES)
def test_values_from_text(kb, text, expected):
    got = facts(kb, text)
    assert {k: got.get(k) for k in expected} == expected


# How many users report the common faults (nan-loss, zero-loss, save-export, no-grad-flow,
# system-failure, repetition): the fix that worked, the value they printed, the line they pasted.
COMMON_FAULTS = [
    ("with fp32 it trains fine, only fp16 gives nan", {"fp16overflow.fp32_ok": True}),
    ("switching to bf16 fixed it", {"fp16overflow.fp32_ok": True}),
    ("disabling autocast solved the NaN, but training is 80% slower", {"fp16overflow.fp32_ok": True}),
    ("使用 bf16 类型后loss正常", {"fp16overflow.fp32_ok": True}),
    ("switching to bf16 did not fix it", {"fp16overflow.fp32_ok": None}),
    ("改成bf16也不正常", {"fp16overflow.fp32_ok": None}),
    ("I printed the batch and the labels are all -100 after truncation", {"data.labels.no_target": True}),
    ("every label is -100 in some micro-batches", {"data.labels.no_target": True}),
    ("打印出来labels全是-100", {"data.labels.no_target": True}),
    ("最大句长设得太少，导致所有target_mask都是0", {"data.labels.no_target": True}),
    ("cutoff_len 512 is too short for our prompts, the response is truncated away", {"data.labels.no_target": True}),
    ("the labels are not all -100, most rows have targets", {"data.labels.no_target": None}),
    ("labels: [-100, -100, 319, 1234, 2]", {"data.labels.no_target": None}),
    ("adding a small epsilon inside the log fixed the nan", {"nanloss.eps_fixes": True}),
    ("原因是log()里没有加极小的常数", {"nanloss.eps_fixes": True}),
    ("I did not add an epsilon to the denominator", {"nanloss.eps_fixes": None}),
    ("the loss divides by zero when a batch is empty", {"nanloss.custom_math": True}),
    ("model = PeftModel.from_pretrained(model, 'alpaca-lora-7b') and then I continue training on my own data",
     {"nograd.adapter_loaded_frozen": True}),
    ("加载之前训练好的lora权重继续训练，可训练参数为0", {"nograd.adapter_loaded_frozen": True, "grads.trainable_fraction": 0}),
    ("显示可训练参数为0", {"grads.trainable_fraction": 0}),
    ("可训练参数为0.12%", {"grads.trainable_fraction": None}),
    ("flash_attn: disabled  # with this the loss is normal again", {"zeroloss.eager_fixes": True}),
    ("setting flash_attn to disabled worked for me", {"zeroloss.eager_fixes": True}),
    ("flash_attn: fa2", {"zeroloss.eager_fixes": None}),
    ("the base model's eos_token is <|endoftext|> while the chat template ends each turn with <|im_end|>",
     {"model.eos_mismatch": True}),
    ("generation_config.json has a different eos_token_id than tokenizer_config.json", {"model.eos_mismatch": True}),
    ("eos_token is <|im_end|> and the template also uses <|im_end|>", {"model.eos_mismatch": None}),
    ("Running tokenizer on dataset:  88%|████████▊ | 383700/433643 [29:55<03:25, 2432.70 examples/s]Traceback",
     {"system.fails_during_preprocessing": True}),
    ("    with training_args.main_process_first(desc=\"dataset map pre-processing\"):",
     {"system.fails_during_preprocessing": True}),
    ("the NCCL timeout happens during data preprocessing of a 6 GB dataset", {"system.fails_during_preprocessing": True}),
    ("多卡训练在处理数据的时候NCCL超时", {"system.fails_during_preprocessing": True}),
    ("Running tokenizer on dataset: 100%|██████████| 433643/433643 [31:02<00:00]", {"system.fails_during_preprocessing": None}),
    ("the run trains for hours, then CUDA out of memory when saving the checkpoint", {"logs.oom_phase": "save"}),
    ("torch.cuda.OutOfMemoryError raised in bitsandbytes _save_to_state_dict: CUDA out of memory", {"logs.oom_phase": "save"}),
    ("保存模型的时候显存不足", {"logs.oom_phase": "save"}),
    ("CUDA out of memory in the first training step", {"logs.oom_phase": "train"}),
    ("2 nodes, zero2: grad_norm nan and loss 0 after some steps; setting overlap_comm to False works",
     {"dist.version_change_fixes": True}),
    ("overlap_comm改成false后loss正常", {"dist.version_change_fixes": True}),
    ('"overlap_comm": false', {"dist.version_change_fixes": None, "dist.overlap_comm": False}),
    ("trained for 30 epochs on 2k samples", {"train.epochs": 30}),
    ("训练了20个epoch", {"train.epochs": 20}),
    ("at inference I call generate on the raw question without the chat template", {"repetition.template_matches": False}),
    ("the lora weights never change and the loss is flat", {"nograd.weights_changed": False}),
    ("My GPU has 24GB and training uses 18GB, no out of memory so far", {"logs.oom_phase": None}),
    ("Saving the checkpoint takes 10 minutes, is that expected for a 70B model?", {"logs.oom_phase": None}),
    ("I preprocess the dataset with map(num_proc=16) before launching torchrun, then train normally",
     {"system.fails_during_preprocessing": None}),
    ("The labels for the prompt are -100 and the answer tokens keep their ids", {"data.labels.no_target": None}),
    ("I set flash_attn: disabled, but it did not work, the loss is still 0", {"zeroloss.eager_fixes": None}),
    ("overlap_comm: false, still doesn't work", {"dist.version_change_fixes": None}),
    ("saving the checkpoint works, no out of memory", {"logs.oom_phase": None}),
    ("my Modelfile only has FROM ./qwen2-sft.gguf and ollama answers nonsense",
     {"export.serving_template_missing": True, "export.served_by_other_engine": True}),
    ("转成gguf导入ollama后胡乱回答，后来在Modelfile里加上TEMPLATE就好了",
     {"export.serving_template_missing": True, "export.converted_bad_hf_ok": True}),
    ("the Modelfile has the TEMPLATE and the stop parameters from the training template", {"export.serving_template_missing": None}),
]


@pytest.mark.parametrize("text,expected", COMMON_FAULTS)
def test_common_fault_phrases(kb, text, expected):
    got = facts(kb, text)
    assert {k: got.get(k) for k in expected} == expected


NEGATIONS = [
    ("I'm not using fp16", "train.precision", None),
    ("没有用fp16", "train.precision", None),
    ("我们没有开启bf16", "train.precision", None),
    ("--no-fp16 --lr 1e-4", "train.precision", None),
    ('"fp16": {"enabled": false}', "train.precision", None),
    ("fp16=False", "train.precision", None),
    ("training without gradient clipping", "train.grad_clip", 0),
    ("no grad clipping at all", "train.grad_clip", 0),
    ("没有梯度裁剪", "train.grad_clip", 0),
    ("gradient checkpointing is disabled", "train.gradient_checkpointing", False),
    ("switched from fp16 to bf16 and it still NaNs", "train.precision", "bf16"),
    ("从fp16改成bf16以后还是nan", "train.precision", "bf16"),
    ("loss does not decrease; we train in fp16", "train.precision", "fp16"),
]


@pytest.mark.parametrize("text,fact,expected", NEGATIONS)
def test_negation_never_sets_a_fact_positively(kb, text, fact, expected):
    assert facts(kb, text).get(fact) == expected


def test_disagreeing_phrases_leave_the_fact_unset(kb):
    ex = extract(kb, "fp16 gives nan, bf16 gives nan too")
    assert "train.precision" not in ex.facts and "train.precision" in ex.ambiguous


def test_the_run_that_worked_lends_this_run_no_setting(kb):
    """'fp32 works' is another run (fp16overflow.fp32_ok is an other_run fact): this one is fp16."""
    ex = extract(kb, "fp16 gives nan, fp32 works")
    assert ex.facts["train.precision"].value == "fp16" and "train.precision" not in ex.ambiguous


SIGNATURES = [
    ("Assertion `srcIndex < srcSelectDimSize` failed.", "cuda_index_assert", {"data.tokens.out_of_range": True}),
    ("Assertion `t >= 0 && t < n_classes` failed.", "cuda_label_assert", {"data.tokens.out_of_range": True}),
    ("RuntimeError: Expected to mark a variable ready only once. This error is caused by",
     "ddp_variable_ready_twice", {"dist.ddp_ready_twice_error": True, "train.parallelism": "data"}),
    ("RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn", "no_grad_fn",
     {"nograd.no_grad_fn_error": True}),
    ("Cannot merge adapters to a quantized model.", "peft_merge_into_quantized", {"export.merged_into_quantized": True}),
    ("ValueError: Unsloth: Untrained tokens found, but embed_tokens & lm_head not trainable, causing NaNs.",
     "unsloth_untrained_tokens", {"train.base_model_chat_tokens": True}),
    ('raise Exception("No tokens available to compute loss.")', "no_tokens_for_loss", {"data.labels.no_target": True}),
    ("Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
     "loss_scale_minimum", {"fp16overflow.scale_at_minimum": True, "train.precision": "fp16"}),
    ("ValueError: Attempting to unscale FP16 gradients.", "unscale_fp16_gradients", {"fp16overflow.unscale_error": True}),
    ("torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL",
     "killed_sigkill", {"system.killed_signal9": True}),
    ("File \"trainer.py\", line 3012, in evaluation_loop\ntorch.cuda.OutOfMemoryError: CUDA out of memory. Tried to "
     "allocate 20.00 MiB", "cuda_oom", {"logs.oom_phase": "eval"}),
    ("File \"trainer.py\", line 2216, in _inner_training_loop\ntorch.cuda.OutOfMemoryError: CUDA out of memory.",
     "cuda_oom", {"logs.oom_phase": "train"}),
    ("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, "
     "NumelOut=466119168, Timeout(ms)=600000) ran for 600004 milliseconds before timing out.",
     "nccl_watchdog_timeout", {"logs.system_error": "nccl-timeout"}),
    ("RuntimeError: probability tensor contains either `inf`, `nan` or element < 0", "probability_nan",
     {"forward.loss_finite": False}),
    ("[2024-01-01 10:00:00,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
     "Attempted loss scale: 2, reducing to 1", "deepspeed_overflow_skip", {"fp16overflow.scale_at_minimum": True}),
    ("`use_cache=True` is incompatible with gradient checkpointing. Setting `use_cache=False`.\n"
     "  0%|          | 0/1465 [00:00<?, ?it/s]", "gc_use_cache_off", {"train.gradient_checkpointing": True}),
    ("/usr/lib/python3.10/site-packages/torch/utils/checkpoint.py:429: UserWarning: torch.utils.checkpoint: please pass "
     "in use_reentrant=True or use_reentrant=False explicitly. The default value of use_reentrant will be updated",
     "gc_use_reentrant_unset", {"train.gradient_checkpointing": True}),
    ("ValueError: You cannot perform fine-tuning on purely quantized models. Please attach trainable adapters on top of "
     "the quantized model", "quantized_without_adapters", {"grads.trainable_fraction": 0}),
    ("UserWarning: Could not find response key `### Answer:` in the following instance: <s> ### Question: hi ... This "
     "instance will be ignored in loss calculation. Note, if this happens often, consider increasing the `max_seq_length`.",
     "completion_only_template_missing", {"data.labels.no_target": True, "zeroloss.template_warning": True}),
    ("[2024-03-08 16:33:21,416] [INFO] [unfused_optimizer.py:207:step] [deepspeed] fp16 dynamic loss scale overflow! "
     "Skipping step. Attempted loss scale: 1, reducing to 1", "deepspeed_dynamic_scale_overflow",
     {"train.precision": "fp16", "fp16overflow.scale_at_minimum": True}),
    ("AssertionError: Rank 11: found NaN in local grad norm in backward pass before data-parallel communication "
     "collective. Device: 3, node: node-15-11", "megatron_nan_grad_norm", {"grads.nonfinite": True, "logs.nan": True}),
    ("RuntimeError: Rank 2, node n1, device 2, iteration 412: Unexpected result nan (message='found NaN in local forward "
     "loss calculation')", "megatron_nan_forward_loss", {"logs.nan": True}),
    ("File \"transformers/trainer_pt_utils.py\", line 110, in nested_concat\ntorch.cuda.OutOfMemoryError: CUDA out of "
     "memory. Tried to allocate 7.81 GiB", "cuda_oom", {"evaloom.accumulates_logits": True}),
    ("File \"transformers/generation/utils.py\", line 2410, in _sample\n    outputs = self(**model_inputs)\n"
     "torch.cuda.OutOfMemoryError: CUDA out of memory.", "cuda_oom", {"evaloom.generates": True}),
    ("ScatterGatherKernel.cu:144: operator(): block: [0,0,0], thread: [1,0,0] Assertion `idx_dim >= 0 && idx_dim < "
     "index_size && \"index out of bounds\"` failed.", "scatter_gather_index_assert", {"data.tokens.out_of_range": True}),
    ("RuntimeError: FlashAttention only supports Ampere GPUs or newer.", "flash_attn_needs_ampere",
     {"train.attn_impl": "flash-attn", "zeroloss.gpu_pre_ampere": True}),
    ("[rank1]:[E1003 18:37:01.833621509 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 1] Timeout at NCCL work: "
     "6463, last enqueued NCCL work: 6463, last completed NCCL work: 6462.", "nccl_watchdog_timeout",
     {"logs.system_error": "nccl-timeout"}),
    ("torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via "
     "c10d key-value store by key '0', but store->get('0') got error: Socket Timeout", "nccl_unique_id_store_timeout",
     {"system.fails_at_init": True}),
    ("[WARNING|trainer.py:2707] >> deepspeed.save_16bit_model didn't save the model, since "
     "stage3_gather_16bit_weights_on_model_save=false. Saving the full checkpoint instead, use zero_to_fp32.py to "
     "recover weights", "zero3_16bit_not_saved", {"train.zero_stage": 3}),
    ("RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:\n\tsize mismatch for model.embed_tokens.weight: "
     "copying a param with shape torch.Size([0]) from checkpoint, the shape in current model is torch.Size([32000, 4096]).",
     "load_empty_zero3_tensor", {"weights.empty_tensors": 1, "export.resized_embeddings": None}),
    ("\tsize mismatch for base_model.model.lm_head.weight: copying a param with shape torch.Size([32001, 4096]) from "
     "checkpoint, the shape in current model is torch.Size([32000, 4096]).", "load_vocab_size_mismatch",
     {"export.resized_embeddings": True}),
    ("peft/utils/save_and_load.py:260: UserWarning: Setting `save_embedding_layers` to `True` as the embedding layer has "
     "been resized during finetuning.", "peft_saves_resized_embeddings",
     {"export.resized_embeddings": True, "weights.lora_saves_embeddings": True}),
    ("Some weights of LlamaForCausalLM were not initialized from the model checkpoint at ./out and are newly "
     "initialized: ['lm_head.weight']", "lm_head_newly_initialized", {"weights.tie_broken": True}),
    ("It is strongly recommended to train Gemma2 models with the `eager` attention implementation instead of "
     "`flash_attention_2`. Use `eager` with `AutoModelForCausalLM.from_pretrained('<path-to-checkpoint>', "
     "attn_implementation='eager')`.", "gemma_train_eager_warning",
     {"model.attn_softcapping": True, "model.attn_implementation": "flash_attention_2"}),
    ("It is strongly recommended to train Gemma3 models with the eager attention implementation instead of sdpa.",
     "gemma_train_eager_warning", {"model.attn_softcapping": None, "model.attn_implementation": "sdpa"}),
    ("The attention mask is not set and cannot be inferred from input because pad token is same as eos token. As a "
     "consequence, you may observe unexpected behavior.", "generate_pad_is_eos", {"model.pad_is_eos": True}),
    ("UserWarning: The average ratio of batch (13.70) exceeds threshold 10.00. Skipping batch.", "ppo_ratio_threshold",
     {"pref.ratio_warning": True}),
    ("WARNING: tokenization mismatch: 1847 vs. 1846. (ignored)", "tokenization_mismatch_ignored",
     {"data.labels.no_target": True}),
    ("RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: "
     "CollectiveFingerPrint(OpType=ALLGATHER, TensorShape=[4]), but Rank 1 is running collective: "
     "CollectiveFingerPrint(OpType=BROADCAST)", "collectives_mismatch", {"logs.system_error": "nccl-timeout"}),
    ("WARNING - Gradient accumulation steps mismatch: GradientAccumulationPlugin has 1, DeepSpeed config has 8. Using "
     "DeepSpeed's value.", "accelerate_ga_mismatch", {"train.framework": "deepspeed"}),
    ("FSDP Warning: When using FSDP, it is efficient and recommended to call prepare for the model before creating the "
     "optimizer", "fsdp_optimizer_before_prepare", {"train.fsdp": True, "nograd.optimizer_built_early": True}),
    ("node-2:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer 10.2.0.5<33092> with "
     "error 12, opcode 0, len 0, vendor err 129 (Recv)", "nccl_error", {"system.nccl_error": True}),
    ("ValueError: Asking to pad but the tokenizer does not have a padding token. Please select a token to use as "
     "`pad_token` `(tokenizer.pad_token = tokenizer.eos_token e.g.)`", "tokenizer_without_pad", {"model.pad_is_eos": None}),
    ("Setting `pad_token_id` to `eos_token_id`:128001 for open-end generation.", "generate_pad_from_eos",
     {"model.pad_is_eos": None}),
    ("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
     "tensors_on_two_devices", {}),
    ("AssertionError: num_heads (52) must be divisible by mp_size (8)", "heads_not_divisible",
     {"tp.kv_heads_divisible": False}),
    ("ValueError: num_attention_heads (40) must be a multiple of tensor_model_parallel_size (3).", "heads_not_divisible",
     {"tp.kv_heads_divisible": False}),
]


SIGNATURES += [
    ("  File \"/opt/conda/lib/python3.10/site-packages/torch/optim/optimizer.py\", line 261, in __init__\n"
     "    raise ValueError(\"optimizer got an empty parameter list\")\nValueError: optimizer got an empty parameter list",
     "optimizer_empty_params", {"grads.trainable_fraction": 0}),
    ("RuntimeError: DataLoader worker (pid 4121) is killed by signal: Bus error. It is possible that dataloader's workers "
     "are out of shared memory.\nERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
     "shared memory (shm).", "killed_sigkill", {"system.killed_signal9": True}),
    ("  File \"/usr/lib/python3.10/site-packages/torch/amp/grad_scaler.py\", line 451, in step\n"
     "    assert len(optimizer_state[\"found_inf_per_device\"]) > 0, \"No inf checks were recorded for this optimizer.\"\n"
     "AssertionError: No inf checks were recorded for this optimizer.", "gradscaler_no_inf_checks",
     {"grads.none_params": 1, "train.precision": "fp16"}),
    ("RuntimeError: Error(s) in loading state_dict for PeftModelForCausalLM:\n\tsize mismatch for "
     "base_model.model.lm_head.modules_to_save.default.weight: copying a param with shape torch.Size([151936, 4096]) "
     "from checkpoint, the shape in current model is torch.Size([151860, 4096]).", "load_vocab_size_mismatch",
     {"export.resized_embeddings": True}),
]


NEAR_MISSES = [   # text that names the error without showing it, or a harmless sibling line
    ("Some weights of the model checkpoint at ./out were not used when initializing LlamaForCausalLM: ['lm_head.weight']",
     "lm_head_newly_initialized"),
    ("Some weights of LlamaForCausalLM were not initialized from the model checkpoint and are newly initialized: "
     "['model.layers.0.self_attn.rotary_emb.inv_freq']", None),
    ("size mismatch for model.layers.0.mlp.up_proj.weight: copying a param with shape torch.Size([11008, 4096]) from "
     "checkpoint", "load_vocab_size_mismatch"),
    ("I set use_cache=False and turned gradient checkpointing off", "gc_use_cache_off"),
    ("Gradient overflow is rare with bf16", "deepspeed_dynamic_scale_overflow"),
    ("the NCCL communicator setup is fine on one node", "nccl_unique_id_store_timeout"),
    ("The average ratio of wins is high", "ppo_ratio_threshold"),
]


@pytest.mark.parametrize("text,signature", NEAR_MISSES)
def test_near_misses_set_no_signature_fact(kb, text, signature):
    ex = extract(kb, text)
    if signature:
        assert signature not in [s.signature.id for s in ex.signatures]
    assert "weights.tie_broken" not in ex.facts


@pytest.mark.parametrize("text,signature,expected", SIGNATURES)
def test_signatures(kb, text, signature, expected):
    ex = extract(kb, text)
    assert signature in [s.signature.id for s in ex.signatures]
    got = {name: hit.value for name, hit in ex.facts.items()}
    assert {k: got.get(k) for k in expected} == expected


def test_every_knowledge_expression_is_linear_time(kb):
    problems = [(p.rx, linear_problem(p.rx)) for p in table(kb) if linear_problem(p.rx)]
    assert problems == []


def test_the_cached_pattern_table_reads_back_as_built(kb):
    """The table is cached as plain tuples; a process reading the cache gets exactly the patterns
    a fresh build makes (prefilter groups and choice pairs included), and a cache file holding the
    older one-dict-per-row form is rebuilt, not misread."""
    from troubleshoot.evidence import patterns
    from troubleshoot.knowledge import cache

    built = patterns.build(kb)
    patterns._TABLES.clear()
    assert patterns.table(kb) == built  # written by this call or an earlier one, then read back
    patterns._TABLES.clear()
    assert patterns.table(kb) == built  # read back from the cache file
    assert any(p.values for p in built) and any(p.requires for p in built) and any(p.sets for p in built)
    files = list(cache.cache_dir().glob(f"patterns-*{cache.SUFFIX}"))
    assert files
    for file in files:
        file.write_bytes(marshal.dumps([dict(p._asdict()) for p in built]))
    patterns._TABLES.clear()
    assert patterns.table(kb) == built


def test_a_dense_literal_does_not_hide_the_rare_words_it_needs(kb):
    """A DeepSpeed log says OVERFLOW on every line; the phrase that the skips were harmless ("it
    recovered") is searched around its own rare words, and still found after 20k overflow lines."""
    text = ("[INFO] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536\n" * 20_000
            + "overflow at the start, then it recovered and the loss keeps decreasing\n")
    assert extract(kb, text).facts["fp16overflow.occasional_skips"].value is True


def test_windowed_search_finds_what_a_full_scan_finds(kb):
    """Each expression is searched only around the occurrences of its least frequent required
    literals (extract._matches); on real report text it finds a match exactly when a full scan does."""
    from pathlib import Path

    import yaml

    from troubleshoot.evidence.extract import _matches

    corpus = Path(__file__).resolve().parents[1] / "bench" / "corpus" / "tune"
    texts = [f"{r['title']}\n{r['body']}" for r in
             (yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(corpus.glob("*/report.yaml"))[:60])]
    checked = 0
    for text in texts:
        lowered = text.lower()
        for pattern in table(kb):
            groups = [pattern.literals, *pattern.requires] if pattern.literals else []
            if not all(any(lit in lowered for lit in group) for group in groups):
                continue
            windowed = next(_matches(pattern, text, lowered, lowered.count), None) is not None
            assert windowed == (pattern.compiled.search(text) is not None), (pattern.rx, text[:80])
            checked += 1
    assert checked > 1000


@pytest.mark.parametrize("rx", [r"(a+)+b", r"(?:x|xy){1,50}z", r"foo.*bar", r"(\s{0,3}a){2,9}"])
def test_super_linear_expressions_are_refused(rx):
    assert linear_problem(rx)


def test_ask_ranks_the_signature_cause_first_and_quotes_it():
    text = ("RuntimeError: CUDA error: device-side assert triggered\n"
            "Indexing.cu:1146: indexSelectLargeIndex: Assertion `srcIndex < srcSelectDimSize` failed.")
    result = CliRunner().invoke(main, ["ask", text, "--no-input", "--json"])
    diag = json.loads(result.stdout)
    top = diag["causes"][0]
    assert top["id"] == "nan-loss.token-out-of-range"
    line = next(e for e in top["evidence"] if e["fact"] == "data.tokens.out_of_range")
    assert line["from"] == "text" and "srcIndex" in line["span"] and f'from "{line["span"][:30]}' in top["why"]
    assert "nan-loss.token-out-of-range" not in [c["id"] for c in diag["causes"] if c["status"] == "ruled-out"]


def test_text_never_overrides_an_answer():
    result = CliRunner().invoke(main, ["ask", "loss went nan with --fp16", "--no-input", "--json",
                                       "--answer", "train.precision=bf16"])
    diag = json.loads(result.stdout)
    used = [e for c in diag["causes"] for e in c["evidence"] if e["fact"] == "train.precision"]
    assert used and all(e["value"] == "bf16" and e["from"] == "user" for e in used)


def test_weak_text_fact_is_tempered_and_never_confirms(kb):
    from troubleshoot.engine import score_cause
    from troubleshoot.observations import Fact

    cause = kb.causes["nan-loss.token-out-of-range"]
    strong, _, confirmed = score_cause(cause, {"data.tokens.out_of_range": Fact("data.tokens.out_of_range", True, "probe:batch")})
    weak, lines, weak_confirmed = score_cause(
        cause, {"data.tokens.out_of_range": Fact("data.tokens.out_of_range", True, "text", span="x", trust=0.5)})
    assert confirmed and not weak_confirmed and weak < strong
    assert lines[0].factor == pytest.approx(50 ** 0.5)


BF16_NAMES = [
    ("model_name_or_path: Qwen/Qwen2-7B\nfp16: true", "Qwen2"),
    ('model = AutoModelForCausalLM.from_pretrained("google/gemma-2b")', "gemma"),
    ("python run_translation.py --model_name_or_path google/flan-t5-xl --fp16", "flan-t5"),
    ("accelerate launch sft.py --model meta-llama/Meta-Llama-3-8B --fp16", "Llama-3"),
    ("tokenizer = AutoTokenizer.from_pretrained('meta-llama/Llama-2-7b-hf')", "Llama-2"),
    ("用 Qwen1.5-7B-Chat 做 LoRA 微调", "Qwen1.5"),
    ("fine-tuning mt5-base for summarization", "mt5"),
    ("mistralai/Mistral-7B-v0.1 with model.half()", "Mistral"),
    ("Loss nan while fine tuning Falcon7b with the default settings", "Falcon7b"),
    ("base_model: tiiuae/falcon-40b", "falcon-40b"),
    ("--model_name_or_path /home/models/Baichuan2-7B-Chat --fp16", "Baichuan2"),
    ("用Baichuan2_13B做全参微调", "Baichuan2"),
    ("用Qwen2-7B做sft，loss不降", "Qwen2"),            # a CJK letter before the name is no word of it
    ("fine-tuning deepseek-llm-7b-base with fp16", "deepseek-llm"),
]
NOT_BF16_NAMES = [
    "fine-tuning gpt2 with fp16=True",                  # GPT-2 was released in fp32
    "huggyllama/llama-7b with --fp16",                  # LLaMA-1 checkpoints are fp16
    "decapoda-research/llama-30b-hf",
    "TinyLlama/TinyLlama-1.1B --fp16",
    "I'm not using Qwen2, it's gpt2 with fp16",         # a negated name sets nothing
    "没有用gemma，用的是opt-1.3b",
    "the falconry dataset",
    "baichuan-inc/Baichuan-13B-Chat --fp16",            # Baichuan 1 is not checked
]


@pytest.mark.parametrize("text,span", BF16_NAMES)
def test_a_bf16_model_family_named_in_text_sets_a_tempered_pretrained_dtype(kb, text, span):
    hit = extract(kb, text).facts["model.pretrained_dtype"]
    assert (hit.value, hit.span, hit.kind) == ("bf16", span, "text") and hit.trust < 1


@pytest.mark.parametrize("text", NOT_BF16_NAMES)
def test_fp16_or_fp32_families_and_negated_names_set_no_dtype(kb, text):
    assert "model.pretrained_dtype" not in facts(kb, text)


def test_a_pasted_torch_dtype_outranks_the_model_name(kb):
    text = '{"_name_or_path": "Qwen/Qwen2-7B", "torch_dtype": "float32"}'
    assert facts(kb, text)["model.pretrained_dtype"] == "fp32"


def _ranked(text: str, *args: str) -> list[dict]:
    result = CliRunner().invoke(main, ["ask", text, "--no-input", "--json", *args])
    return json.loads(result.stdout)["causes"]


BF16_REPORTS = [
    "Fine-tuning Qwen/Qwen2-7B with TrainingArguments(fp16=True, learning_rate=2e-5): after about 200 steps "
    "the loss becomes nan and stays nan.",
    "用 google/gemma-2b 做全参微调，开了 --fp16，训练几十步后 loss 变成 nan 了，学习率 1e-5。",
]
FP16_ON_BF16 = {"nan-loss.fp16-on-bf16-model", "fp16-overflow.bf16-weights-in-fp16"}


@pytest.mark.parametrize("text", BF16_REPORTS)
def test_a_named_bf16_model_in_fp16_ranks_the_overflow_cause(text):
    causes = _ranked(text)
    assert FP16_ON_BF16 & {c["id"] for c in causes[:3]}
    used = [e for c in causes for e in c["evidence"] if e["fact"] == "model.pretrained_dtype"]
    assert used and all(e["value"] == "bf16" and e["from"] == "text" for e in used)


def test_a_probed_config_dtype_wins_over_the_model_name(tmp_path):
    from transformers import Qwen2Config

    config = Qwen2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         intermediate_size=128, vocab_size=1000)
    config.dtype = "float32"
    config.save_pretrained(tmp_path)
    named = _ranked(BF16_REPORTS[0])
    probed = _ranked(BF16_REPORTS[0], "--probe", str(tmp_path / "config.json"))
    used = [e for c in probed for e in c["evidence"] if e["fact"] == "model.pretrained_dtype"]
    assert used and all(e["value"] == "fp32" and e["from"] == "probe:config" for e in used)

    def rank(causes):
        return [c["id"] for c in causes].index("nan-loss.fp16-on-bf16-model")
    assert rank(probed) > rank(named) == 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=3000))
def test_any_text_is_read_without_error(kb, text):
    ex = extract(kb, text)
    for hit in ex.facts.values():
        assert hit.fact in kb.facts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4000))
def test_binary_junk_is_read_without_error(kb, junk):
    extract(kb, junk.decode("utf-8", "replace"))
    extract(kb, junk.decode("latin-1"))


def test_ten_megabyte_paste(kb):
    noise = "{'loss': 2.31, 'grad_norm': 1.1, 'learning_rate': 1e-05, 'epoch': 0.1}\n" * 60_000
    noise += "lr lr lr lr ((((((((( --- ==== :::: " * 100_000   # hostile: many prefilter hits, long runs
    noise += "x" * 2_500_000 + "\n"                              # one 2.5 MB line
    text = noise + "RuntimeError: Expected to mark a variable ready only once.\n"
    assert len(text) > 10_000_000
    ex = extract(kb, text)
    assert [s.signature.id for s in ex.signatures] == ["ddp_variable_ready_twice"]
    assert ex.signatures[0].line == text.count("\n")


# How users describe the faults of the remaining symptoms (issue 13, second knowledge round):
# preference tuning, eval OOM, forgetting, MoE routing, tensor parallelism and conversion, long context.
FAULTS_ROUND_TWO = [
    ("during DPO both chosen and rejected rewards keep decreasing", {"logs.pref.rewards_both_falling": True}),
    ("the chosen and rejected rewards are both negative and decreasing", {"logs.pref.rewards_both_falling": True}),
    ("DPO训练，chosen_reward和rejected_reward都是负数，而且随着训练越来越小", {"logs.pref.rewards_both_falling": True}),
    ("chosen和rejected的奖励均为负数并且不断下降", {"logs.pref.rewards_both_falling": True}),
    ("rewards/chosen goes up while rewards/rejected falls, margins grow", {"logs.pref.rewards_both_falling": None}),
    ("the chosen and rejected rewards are not both decreasing, only the rejected one", {"logs.pref.rewards_both_falling": None}),
    ("GRPO: after 200 steps the KL keeps increasing and the reward collapses", {"logs.pref.kl_exploding": True}),
    ("kl_loss explodes around step 300", {"logs.pref.kl_exploding": True}),
    ("训练到200个step左右KL散度变得特别高", {"logs.pref.kl_exploding": True}),
    ("the KL does not explode, it stays around 0.05", {"logs.pref.kl_exploding": None}),
    ("{'loss': 0.6931, 'learning_rate': 5e-07, 'rewards/chosen': 0.0, 'rewards/rejected': 0.0, 'rewards/accuracies': 0.0}",
     {"logs.pref.loss_stuck": True}),
    ("{'loss': 0.6931, 'learning_rate': 5e-07, 'rewards/chosen': 0.0123, 'rewards/rejected': -0.004}",
     {"logs.pref.loss_stuck": None}),
    ("the Trainer accumulates all the logits of the eval set on the GPU", {"evaloom.accumulates_logits": True}),
    ("preds_host = logits if preds_host is None else nested_concat(preds_host, logits)", {"evaloom.accumulates_logits": True}),
    ("trainer.py 会累积所有的logits导致评估时OOM", {"evaloom.accumulates_logits": True}),
    ("default config, ziya-llama, 10k samples, 3 epochs", {"train.epochs": 3}),
    ("训练了5个epoch之后通用能力下降", {"train.epochs": 5}),
    ("the aux loss is always 1.0 whatever the routing does", {"moe.aux_loss_constant": True}),
    ("load balancing loss never changes during training", {"moe.aux_loss_constant": True}),
    ("负载均衡的aux loss一直不变", {"moe.aux_loss_constant": True}),
    ("the aux loss is not constant, it falls from 3 to 1.1", {"moe.aux_loss_constant": None}),
    ("some experts never get any tokens after 2k steps", {"moe.dead_experts": 1}),
    ("有些专家从来没被选中", {"moe.dead_experts": 1}),
    ("no dead experts, every expert gets tokens", {"moe.dead_experts": None}),
    ("the generations become gibberish after converting to huggingface format", {"tp.converted_checkpoint": True}),
    ("python tools/convert_to_hf.py --input_dir ckpt/global_step1000", {"tp.converted_checkpoint": True}),
    ("megatron模型转换成hf格式后输出乱码", {"tp.converted_checkpoint": True}),
    ("with model-parallel-size 1 the output is normal, but with model-parallel-size 2 it is random",
     {"tp.diverges_only_with_tp": True}),
    ("the loss is wrong only happens with tp=2", {"tp.diverges_only_with_tp": True}),
    ("it does not work even with tp=1, and with tp=2 it fails too", {"tp.diverges_only_with_tp": None}),
    ("the output is gibberish beyond 4096 tokens", {"posenc.fails_past_trained": True}),
    ("answers degrade past the trained context length", {"posenc.fails_past_trained": True}),
    ("超过4k后输出乱码", {"posenc.fails_past_trained": True}),
    ("the output is fine beyond 4096 tokens, no gibberish", {"posenc.fails_past_trained": None}),
    ("--rope_scaling linear --cutoff_len 16384", {"model.rope_scaling": True}),
    ('"rope_scaling": {"type": "yarn", "factor": 4.0}', {"model.rope_scaling": True}),
    ('"rope_scaling": null', {"model.rope_scaling": None}),
    ("should I use dynamic NTK or YaRN beyond 32k?", {"model.rope_scaling": None}),
    ("after resuming training from checkpoint-2000 the loss jumped", {"lossspike.after_resume": True}),
    ("加载checkpoint继续训练以后loss突然变大", {"lossspike.after_resume": True}),
    ("batched generation gives different output than generating one prompt at a time",
     {"mask.batched_differs": True, "posenc.batch_differs": True}),
    ("with left padding the shorter prompts in the batch produce garbage", {"mask.batched_differs": True}),
    ("批量推理和单条推理的结果不一致", {"mask.batched_differs": True, "posenc.batch_differs": True}),
    ("batched inference results do not differ from single runs", {"mask.batched_differs": None}),
    ("in training the attention_mask is ignored and only the loss skips the padding", {"mask.passed_to_model": False}),
    ("模型在前向传播过程中没有设置attention mask，只在计算loss的时候忽略padding", {"mask.passed_to_model": False}),
    ("the attention_mask is passed to the model and the padding is masked", {"mask.passed_to_model": None}),
    ("python finetune.py --base_model llama-7b --group_by_length --micro_batch_size 8", {"lossspike.length_grouped": True}),
    ("group_by_length: false", {"lossspike.length_grouped": False}),
    ("使用LengthGroupedSampler时loss曲线会周期性振荡", {"lossspike.length_grouped": True, "lossspike.periodic": True}),
    ("the training loss seems to oscillate in a fixed period", {"lossspike.periodic": True}),
    ("a sawtooth shape in the loss on alpaca data", {"lossspike.periodic": True}),
    ("the loss has no periodic spikes, just one jump at step 7000", {"lossspike.periodic": None}),
    ("after fine-tuning the model prints a literal \\n instead of new lines", {"artifacts.outputs_escape_chars": True}),
    ("the answers are full of &amp; and &quot; after sft", {"artifacts.outputs_escape_chars": True}),
    ("微调后输出里全是\\n和转义字符", {"artifacts.outputs_escape_chars": True}),
    ("the output has no literal \\n anymore after the fix", {"artifacts.outputs_escape_chars": None}),
    ("the responses contain lots of html tags and navigation links", {"artifacts.outputs_markup": True}),
    ("模型的回答里有很多html标签", {"artifacts.outputs_markup": True}),
    ("my eval score is suspiciously high, the test questions are also in the training data", {"artifacts.eval_overlap": True}),
    ("测试集的数据混进了训练集", {"artifacts.eval_overlap": True}),
    ("there is no data contamination, I deduplicated against the benchmark", {"artifacts.eval_overlap": None}),
    ("training from scratch, the initial loss is 45", {"logs.initial_loss": 45}),
    ("the loss starts at 11.2 and goes down to 3", {"logs.initial_loss": 11.2}),
    ("从头预训练，初始loss是52", {"logs.initial_loss": 52}),
    ("the final loss is 2.1", {"logs.initial_loss": None}),
    ("after converting nemo to hf the embed_tokens shape changed from 128256 to 128000", {"tp.vocab_padding_differs": True}),
    ("the vocab is padded to a multiple of 128 in Megatron", {"tp.vocab_padding_differs": True}),
    ("RuntimeError: Error(s) in loading state_dict for GPTNeoXForCausalLM:\n\tsize mismatch for gpt_neox.embed_in.weight: "
     "copying a param with shape torch.Size([50304, 2048]) from checkpoint, the shape in current model is torch.Size([50277, 2048]).\n"
     "trained with --make-vocab-size-divisible-by 128", {"tp.vocab_padding_differs": True, "export.resized_embeddings": True}),
]


@pytest.mark.parametrize("text,expected", FAULTS_ROUND_TWO)
def test_round_two_fault_phrases(kb, text, expected):
    got = facts(kb, text)
    assert {k: got.get(k) for k in expected} == expected
