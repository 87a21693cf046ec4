"""The error lines users paste most into tracker threads (rules/_signatures/tracker-errors.yaml):
each pasted traceback sets its facts, a sibling line that means something else does not, and
`llmfix ask` ranks the cause that reads the fact first only when the line is pasted."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from troubleshoot.cli import main
from troubleshoot.evidence import extract
from troubleshoot.knowledge import load


@pytest.fixture(scope="module")
def kb():
    return load()


# (paste as users copy it from their console, signature, facts it must set; None = must stay unset)
PASTES = [
    ("INFO 05-02 11:40:12 llm_engine.py:237] Initializing an LLM engine with config: dtype=torch.bfloat16\n"
     "Traceback (most recent call last):\n  File \"grpo_train.py\", line 88, in <module>\n"
     "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla V100-SXM2-32GB "
     "GPU has compute capability 7.0. You can use float16 instead by explicitly setting the`dtype` flag in CLI, for "
     "example: --dtype=half.", "bf16_needs_ampere", {"zeroloss.gpu_pre_ampere": True}),
    ("  File \"/usr/local/lib/python3.10/dist-packages/torch/nn/functional.py\", line 5382, in multi_head_attention_forward\n"
     "    attn_output_weights = torch.bmm(q_scaled, k.transpose(-2, -1))\n"
     "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmStridedBatchedEx(handle, opa, opb, "
     "(int)m, (int)n, (int)k, (void*)&falpha, a, CUDA_R_16BF, (int)lda, stridea, b, CUDA_R_16BF, (int)ldb, strideb, "
     "(void*)&fbeta, c, CUDA_R_16BF, (int)ldc, stridec, (int)num_batches, compute_type, CUBLAS_GEMM_DEFAULT_TENSOR_OP)`",
     "cublas_bf16_not_supported", {"zeroloss.gpu_pre_ampere": True}),
    ("  File \"/opt/conda/lib/python3.10/site-packages/transformers/models/llama/modeling_llama.py\", line 195, in forward\n"
     "    query_states = self.q_proj(hidden_states)\n"
     "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`\n"
     "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
     "cublas_handle_not_initialized", {"data.tokens.out_of_range": True}),
    ("[rank1]:   File \"/root/.local/lib/python3.11/site-packages/flash_attn/flash_attn_interface.py\", line 1047, in backward\n"
     "[rank1]:     _flash_attn_varlen_backward(\n[rank1]: RuntimeError: CUDA error: misaligned address\n"
     "[rank1]: Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.", "cuda_misaligned_address",
     {"logs.system_error": "cuda-error"}),
    ("model = PeftModel.from_pretrained(base, 'out/checkpoint-600')\nmerged = model.merge_and_unload()\n"
     "  File \"/usr/lib/python3/site-packages/torch/nn/modules/module.py\", line 1326, in convert\n"
     "    return t.to(\nNotImplementedError: Cannot copy out of meta tensor; no data! Please use torch.nn.Module.to_empty() "
     "instead of torch.nn.Module.to() when moving module from meta to a different device.", "meta_tensor_copy",
     {"export.merge_offloaded": True}),
    ("$ ls output/qwen-lora\nREADME.md  adapter_config.json  adapter_model.safetensors  trainer_state.json\n"
     "  File \"/home/u/.venv/lib/python3.10/site-packages/transformers/utils/hub.py\", line 456, in cached_files\n"
     "OSError: output/qwen-lora does not appear to have a file named config.json. Checkout "
     "'https://huggingface.co/output/qwen-lora/tree/None' for available files.", "folder_without_model_files",
     {"export.only_adapter_files": True}),
    ("OSError: ./ckpt/step_500 does not appear to have a file named pytorch_model.bin, model.safetensors, tf_model.h5, "
     "model.ckpt or flax_model.msgpack.", "folder_without_model_files", {"export.only_adapter_files": None}),
    ("[2024-03-11 09:14:55,120] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 20911\n"
     "[2024-03-11 09:14:55,517] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', '-u', 'train.py', "
     "'--local_rank=1', '--deepspeed', 'ds_z3_offload.json'] exits with return code = -9", "deepspeed_launcher_sigkill",
     {"system.killed_signal9": True}),
    ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
     "============================================================\ntrain.py FAILED\n"
     "Root Cause (first observed failure):\n[0]:\n  time      : 2024-06-02_08:31:07\n  host      : 7f3c2a9b1e\n"
     "  rank      : 0 (local_rank: 0)\n  exitcode  : -7 (pid: 311)\n  error_file: <N/A>\n"
     "  traceback : Signal 7 (SIGBUS) received by PID 311", "sigbus_shared_memory", {"system.killed_signal9": True}),
    ("[E socket.cpp:957] [c10d] The client socket has timed out after 900s while trying to connect to (10.0.3.17, 29500).\n"
     "torch.distributed.DistNetworkError: The client socket has timed out after 900s while trying to connect to "
     "(10.0.3.17, 29500).", "rendezvous_connect_timeout", {"system.fails_at_init": True}),
    ("node1:88121:88390 [1] transport/p2p.cc:275 NCCL WARN Cuda failure 'peer access is not supported between these two "
     "devices'\ntorch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
     "unhandled cuda error", "gpu_peer_access_unsupported", {"system.nccl_error": True}),
    ("torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/2 clients joined.",
     "rendezvous_connect_timeout", {"system.fails_at_init": True}),
    ("  File \"train.py\", line 212, in train_step\n"
     "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)\n"
     "RuntimeError: The total norm of order 2.0 for gradients from `parameters` is non-finite, so it cannot be clipped. "
     "To disable this error and scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`",
     "clip_grad_norm_nonfinite", {"grads.nonfinite": True}),
    ("step 1200 | loss 2.311\nWARNING:root:NaN or Inf found in input tensor.\nWARNING:root:NaN or Inf found in input tensor.",
     "tensorboard_nonfinite_scalar", {"logs.nan": True}),
    (" iteration     3150/  500000 | consumed samples:      1612800 | elapsed time per iteration (ms): 4101.3 | "
     "learning rate: 2.997E-04 | global batch size:   512 | lm loss: 4.117021E+00 | loss scale: 1.0 | "
     "number of skipped iterations:   0 | number of nan iterations:   2 |", "megatron_nan_iterations", {"logs.nan": True}),
    ("[2023-07-30 14:02:11,003] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
     "Attempted loss scale: 65536, reducing to 32768\n[WARNING|trainer_pt_utils.py:849] 2023-07-30 14:02:11,005 >> "
     "tried to get lr value before scheduler/optimizer started stepping, returning lr=0\n"
     "{'loss': 1.9871, 'learning_rate': 0, 'epoch': 0.01}", "deepspeed_lr_before_first_step",
     {"train.framework": "deepspeed", "train.precision": "fp16"}),
    ("/usr/local/lib/python3.10/dist-packages/trl/trainer/utils.py:129: UserWarning: The pad_token_id and eos_token_id "
     "values of this tokenizer are identical. If you are planning for multi-turn training, it can result in the model "
     "continuously generating questions and answers without eos token. To avoid this, set the pad_token_id to a "
     "different value.\n  warnings.warn(", "completion_collator_pad_is_eos", {"model.pad_is_eos": True}),
    ("You are resizing the embedding layer without providing a `pad_to_multiple_of` parameter. This means that the new "
     "embedding dimension will be 32003. This might induce some performance reduction as *Tensor Cores* will not be "
     "available.", "embeddings_resized_unpadded", {"export.resized_embeddings": True}),
    ("[INFO|2024-05-20 10:11:02] llamafactory.model.model_utils.embedding:157 >> Resized token embeddings from 151646 "
     "to 151680.", "embeddings_resized_grown", {"export.resized_embeddings": True}),
    ("/opt/conda/lib/python3.10/site-packages/bitsandbytes/nn/modules.py:426: UserWarning: Input type into Linear4bit is "
     "torch.float16, but bnb_4bit_compute_dtype=torch.float32 (default). This will lead to slow inference or training "
     "speed.\n  warnings.warn(", "bnb_linear4bit_fp16_input", {"train.kbit_base": True, "model.dtype": "fp16"}),
    ("/home/u/miniconda3/lib/python3.10/site-packages/bitsandbytes/autograd/_functions.py:322: UserWarning: "
     "MatMul8bitLt: inputs will be cast from torch.bfloat16 to float16 during quantization",
     "bnb_int8_input_cast", {"train.kbit_base": True}),
    ("[INFO|2024-08-02 16:20:11] llamafactory.model.adapter:157 >> Fine-tuning method: Full\n"
     "[INFO|2024-08-02 16:20:14] llamafactory.model.loader:157 >> trainable params: 7,615,616,512 || all params: "
     "7,615,616,512 || trainable%: 100.0000", "llamafactory_full_finetune", {"train.finetune_method": "full"}),
    ("08/02/2024 16:20:11 - INFO - llamafactory.model.adapter - Fine-tuning method: Freeze",
     "llamafactory_freeze_finetune", {"train.finetune_method": "frozen-partial"}),
    ("[INFO|2024-08-02 16:19:58] llamafactory.model.model_utils.quantization:157 >> Quantizing model to 4 bit with "
     "bitsandbytes.", "llamafactory_kbit_quantizing", {"train.kbit_base": True}),
    ("01/15/2024 10:02:44 - INFO - llmtuner.model.patcher - Quantizing model to 8 bit.", "llamafactory_kbit_quantizing",
     {"train.kbit_base": True}),
    ("[INFO|2024-08-02 16:19:40] llamafactory.data.template:157 >> Add pad token: </s>", "llamafactory_pad_from_eos",
     {"model.pad_is_eos": True}),
    ("[INFO|2024-08-02 16:20:11] llamafactory.model.adapter:157 >> Upcasting trainable params to float32.",
     "llamafactory_trainable_fp32", {"fp16overflow.params_loaded_fp16": False}),
    ("[WARNING|2024-08-02 16:20:11] llamafactory.model.adapter:162 >> Vocab has been resized, add embed_tokens,lm_head "
     "to trainable params.", "llamafactory_vocab_resized", {"export.resized_embeddings": True}),
    ("==((====))==  Unsloth 2024.12.4: Fast Llama patching. Transformers:4.46.3.\n"
     "   \\\\   /|    GPU: Tesla T4. Num GPUs = 1. Max memory: 14.741 GB. Platform: Linux.\n"
     "O^O/ \\_/ \\    Torch: 2.5.1+cu121. CUDA: 7.5. CUDA Toolkit: 12.1. Triton: 3.1.0\n"
     "\\        /    Bfloat16 = FALSE. FA [Xformers = 0.0.28.post3. FA2 = False]", "unsloth_banner_no_bf16",
     {"zeroloss.gpu_pre_ampere": True, "train.precision": "fp16"}),
    ("\\        /    Bfloat16 = TRUE. FA [Xformers = 0.0.29.post3. FA2 = False]", "unsloth_banner_bf16",
     {"zeroloss.gpu_pre_ampere": False}),
    ("  File \"/opt/conda/lib/python3.10/site-packages/torch/nn/functional.py\", line 2264, in embedding\n"
     "    return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)\n"
     "RuntimeError: 'weight' must be 2-D", "zero3_partitioned_weight_used", {"train.zero_stage": 3}),
    ("/usr/lib/python3/site-packages/torch/autograd/graph.py:824: UserWarning: Error detected in MmBackward0.\n"
     "RuntimeError: Function 'MmBackward0' returned nan values in its 0th output.", "anomaly_backward_nan",
     {"grads.nonfinite": True}),
    ("ValueError: You can't train a model that has been loaded in 8-bit precision on a different device than the one "
     "you're training on. Make sure you loaded the model on the correct device using for example "
     "`device_map={'':torch.cuda.current_device()}`", "kbit_model_on_other_device", {"train.kbit_base": True}),
    ("ValueError: You can't train a model that has been loaded in 8-bit or 4-bit precision on a different device than "
     "the one you're training on.", "kbit_model_on_other_device", {"train.kbit_base": True}),
    ("(WorkerDict pid=7113) Flash Attention 2.0 only supports torch.float16 and torch.bfloat16 dtypes, but the current "
     "dype in Qwen2ForCausalLM is torch.float32. You should run training or inference using Automatic Mixed-Precision "
     "via the `with torch.autocast(device_type='torch_device'):` decorator.", "flash_attn_fp32_weights",
     {"model.dtype": "fp32", "model.attn_implementation": "flash_attention_2"}),
    ("/data/venv/lib/python3.10/site-packages/trl/trainer/ppo_trainer.py:1240: UserWarning: KL divergence is starting to "
     "become negative: -12.71 - this might be a precursor for failed training. sometimes this happens because the "
     "generation kwargs are not correctly set.", "trl_ppo_negative_kl",
     {"logs.pref.kl_negative": True, "train.pref.algorithm": "ppo"}),
    ("No chat template is set for this tokenizer, falling back to a default class-level template. This is very "
     "error-prone, because models are often trained with templates different from the class default!",
     "chat_template_class_default", {"repetition.template_matches": False}),
]


# (text that looks alike but means something else, the signature it must not fire)
NEAR_MISSES = [
    ("Bfloat16 is supported on this A100, compute capability 8.0", "bf16_needs_ampere"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx( handle, opa, opb, m, n, k, "
     "&falpha, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb, &fbeta, c, CUDA_R_16F, ldc, CUDA_R_32F, "
     "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`", "cublas_bf16_not_supported"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k)`",
     "cublas_handle_not_initialized"),
    ("[ERROR] [launch.py:321:sigkill_handler] ['python', 'train.py'] exits with return code = -92",
     "deepspeed_launcher_sigkill"),
    ("[ERROR] [launch.py:321:sigkill_handler] ['python', 'train.py'] exits with return code = 1",
     "deepspeed_launcher_sigkill"),
    ("  exitcode  : -70 (pid: 12)", "sigbus_shared_memory"),
    ("The server socket on [::ffff:10.0.0.2]:29500 has timed out, will retry.", "rendezvous_connect_timeout"),
    (" iteration      100/  500000 | lm loss: 7.301E+00 | number of skipped iterations:   0 | number of nan iterations:   0 |",
     "megatron_nan_iterations"),
    ("Resized token embeddings from my own script did nothing", "embeddings_resized_grown"),
    ("I set bnb_4bit_compute_dtype=torch.bfloat16 for Linear4bit", "bnb_linear4bit_fp16_input"),
    ("Fine-tuning method: LoRA", "llamafactory_full_finetune"),
    ("Quantizing model to 4 bit with GPTQModel.", "llamafactory_kbit_quantizing"),
    ("[INFO] Add eos token: <|im_end|>.", "llamafactory_pad_from_eos"),
    ("use_bfloat16 = False in my config", "unsloth_banner_no_bf16"),
    ("bfloat16 = True. Platform notes follow", "unsloth_banner_bf16"),
    ("Function 'MmBackward0' returned a tensor with no nan values", "anomaly_backward_nan"),
    ("Flash Attention 2 only supports torch.float16 and torch.bfloat16 dtypes, but the current dype in LlamaModel is "
     "torch.float64", "flash_attn_fp32_weights"),
    ("the KL divergence is positive and stable", "trl_ppo_negative_kl"),
]


@pytest.mark.parametrize("text,signature,expected", PASTES, ids=[f"{p[1]}-{i}" for i, p in enumerate(PASTES)])
def test_paste_sets_the_signature_facts(kb, text, signature, expected):
    ex = extract(kb, text)
    assert signature in [s.signature.id for s in ex.signatures]
    got = {name: hit.value for name, hit in ex.facts.items()}
    assert {k: got.get(k) for k in expected} == expected


@pytest.mark.parametrize("text,signature", NEAR_MISSES, ids=[m[1] for m in NEAR_MISSES])
def test_near_miss_does_not_fire(kb, text, signature):
    assert signature not in [s.signature.id for s in extract(kb, text).signatures]


def test_every_tracker_signature_has_a_paste(kb):
    ours = {s.id for s in kb.signatures.values() if s.file.endswith("tracker-errors.yaml")}
    assert ours and ours == {p[1] for p in PASTES}


# (a user's own words, the line they pasted under them, the cause that reads the line's fact):
# with the line the cause comes first, and the line (not the words) is what lifts it: its score
# with the words alone is lower (the words may still rank it first: "two-node job never starts").
ASKED = [
    ("Training crashes after a few hundred steps on 8 GPUs:",
     "[ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', '--local_rank=7'] exits with return "
     "code = -7", "system-failure.host-memory"),
    ("Two-node job never starts:",
     "[E socket.cpp:957] [c10d] The client socket has timed out after 1800s while trying to connect to (node-0, 29500).",
     "system-failure.nccl-network"),
    ("After LoRA training I cannot load the model:",
     "OSError: output does not appear to have a file named config.json.", "save-export.adapter-only-output"),
    ("The fine-tuned model never stops generating.",
     "UserWarning: The pad_token_id and eos_token_id values of this tokenizer are identical.", "repetition.eos-masked"),
    ("The loss became nan at step 300.",
     "RuntimeError: The total norm of order 2.0 for gradients from `parameters` is non-finite, so it cannot be clipped.",
     "nan-loss.grad-explosion"),
    ("Training crashes in the backward pass:", "RuntimeError: CUDA error: misaligned address",
     "system-failure.kernel-fault"),
    ("QLoRA fine-tuning of gemma-2-9b with Unsloth: the loss is nan after 30 steps.",
     "==((====))==  Unsloth 2024.12.4: Fast Gemma2 patching. Transformers:4.46.3.\n"
     "   \\\\   /|    GPU: NVIDIA GeForce GTX 1660. Num GPUs = 1. Max memory: 5.787 GB.\n"
     "\\        /    Bfloat16 = FALSE. FA [Xformers = 0.0.28.post3. FA2 = False]", "nan-loss.fp16-on-bf16-model"),
    ("The model I fine-tuned with LLaMA-Factory never stops generating.",
     "[INFO|2024-08-02 16:19:40] llamafactory.data.template:157 >> Add pad token: </s>", "repetition.eos-masked"),
    ("PPO training of my chat model collapses after 200 steps.",
     "UserWarning: KL divergence is starting to become negative: -12.71 - this might be a precursor for failed training.",
     "preference-divergence.kl-instability"),
]


def _ranked(text: str) -> dict[str, float]:
    """cause id -> score, best first."""
    result = CliRunner().invoke(main, ["ask", text, "--no-input", "--json", "--top", "50"])
    assert result.exit_code == 0, result.output
    return {c["id"]: c["score"] for c in json.loads(result.stdout)["causes"]}


@pytest.mark.parametrize("words,line,cause", ASKED, ids=[a[2] for a in ASKED])
def test_ask_puts_the_cause_first_with_the_pasted_line(words, line, cause):
    pasted, alone = _ranked(f"{words}\n{line}"), _ranked(words)
    assert next(iter(pasted)) == cause
    assert pasted[cause] > alone.get(cause, 0.0)
