"""Causes a survey of public tracker threads found uncovered (knowledge round of 2026-11-24, fifth
session): a GGUF converter that does not know the tokenizer's pre-tokenizer, a converter made for
another checkpoint format, an export that is not a Hugging Face folder, an adapter trained with
more tokens than the base it is loaded onto, and a base release used as a chat model. Each is read
from how reports describe it, and each ranks in the top 3 of `llmfix ask --no-input --json` on a
short report written for this test."""
from __future__ import annotations

import pytest
from asking import fact_value as fact
from asking import ranked as _ranked

from troubleshoot.knowledge import load


@pytest.fixture(scope="module")
def kb():
    return load()


def top3(text: str) -> list[str]:
    return _ranked(text)[:3]


# --- save-export.gguf-pretokenizer-unrecognized ---------------------------------------------------

@pytest.mark.parametrize("text", [
    'NotImplementedError: BPE pre-tokenizer was not recognized - update get_vocab_base_pre()',
    "WARNING:hf-to-gguf:** WARNING: The BPE pre-tokenizer was not recognized!",
    "RuntimeError: *** Unsloth: Failed compiling llama.cpp with WARNING:hf-to-gguf:"
    "************************************************************************************** . Please report this ASAP!",
    "the converter says my fine-tune's pre-tokenizer isn't recognized",
    "转gguf时报错，预分词器无法识别",
])
def test_an_unknown_pretokenizer_is_read(kb, text):
    assert fact(kb, text, "export.pretokenizer_unrecognized") is True


@pytest.mark.parametrize("text", [
    "INFO:hf-to-gguf:Set model tokenizer, tokenizer.ggml.pre = qwen2",
    "the tokenizer was recognized and the gguf converted fine",
    "WARNING:hf-to-gguf:Couldn't find context length in config.json",
])
def test_other_converter_output_is_not_an_unknown_pretokenizer(kb, text):
    assert fact(kb, text, "export.pretokenizer_unrecognized") is None


def test_an_unknown_pretokenizer_ranks_its_cause():
    report = ("Trying to turn my merged Mistral fine-tune into a q8_0 GGUF with convert_hf_to_gguf.py. It prints "
              "a block of asterisks with chkhsh: 3f1c... and then NotImplementedError: BPE pre-tokenizer was "
              "not recognized - update get_vocab_base_pre()")
    assert "save-export.gguf-pretokenizer-unrecognized" in top3(report)


# --- save-export.converter-format-mismatch --------------------------------------------------------

CONVERTER_TRACE = """Traceback (most recent call last):
  File "/work/tools/ckpt/convert_megatron_to_hf.py", line 311, in <module>
    main()
  File "/work/tools/ckpt/convert_megatron_to_hf.py", line 288, in convert
    hf_name = name_map[op_name]
KeyError: 'self_attention.linear_qkv.layer_norm_weight'"""


def test_a_converter_that_stops_on_a_tensor_name_is_read(kb):
    assert fact(kb, CONVERTER_TRACE, "export.converter_rejects_layout") is True


@pytest.mark.parametrize("text", [
    "the conversion script only supports checkpoints saved by the legacy model, mine is mcore",
    "这个转换脚本只适用于用本仓库训练出来的模型",
])
def test_a_converter_meant_for_another_format_is_read(kb, text):
    assert fact(kb, text, "export.converter_rejects_layout") is True


@pytest.mark.parametrize("text", [
    # a KeyError outside any conversion script
    'File "/home/me/train.py", line 12, in <module>\n    batch["labels"]\nKeyError: \'labels\'',
    # the serving engine's tied-head error is another fault
    'File "/opt/vllm/model_executor/models/llama.py", line 481\nKeyError: \'lm_head.weight\' while converting nothing',
    "the converted model loads but answers with gibberish",
])
def test_other_key_errors_are_not_a_converter_mismatch(kb, text):
    assert fact(kb, text, "export.converter_rejects_layout") is None


def test_a_converter_script_is_noticed(kb):
    assert fact(kb, "ran hf2mcore_qwen2.5_convertor.sh and then the mcore2hf direction", "export.ran_converter") is True
    assert fact(kb, "ran python scripts/convert_to_hf.py on the NeMo checkpoint", "export.ran_converter") is True
    assert fact(kb, "the conversation template is fine", "export.ran_converter") is None


def test_a_converter_mismatch_ranks_its_cause():
    report = ("Converting my Megatron checkpoint (trained with a fork of Megatron-DeepSpeed) to Hugging Face "
              "format fails:\n" + CONVERTER_TRACE)
    assert "save-export.converter-format-mismatch" in top3(report)


# --- save-export.export-folder-incomplete ---------------------------------------------------------

@pytest.mark.parametrize("text", [
    "OSError: Error no file named pytorch_model.bin, model.safetensors, tf_model.h5, model.ckpt.index or "
    "flax_model.msgpack found in directory out/hf_export.",
    "OSError: my-org/my-ft does not appear to have a file named pytorch_model.bin, model.safetensors, tf_model.h5",
])
def test_a_folder_without_weights_is_read(kb, text):
    assert fact(kb, text, "export.no_weights_in_folder") is True


def test_other_missing_files_are_not_a_folder_without_weights(kb):
    assert fact(kb, "OSError: out/ does not appear to have a file named config.json", "export.no_weights_in_folder") is None


@pytest.mark.parametrize("text", [
    "the export step only writes a model.pth file",
    "the checkpointer saved hf_model_0001_0.pt and nothing else",
    "转换后只得到了一个 model.pth",
])
def test_a_raw_state_dict_is_read(kb, text):
    assert fact(kb, text, "export.raw_state_dict_file") is True


def test_a_pth_file_that_is_not_an_export_is_not_read(kb):
    assert fact(kb, "I downloaded resnet50.pth to compare the backbones", "export.raw_state_dict_file") is None


def test_an_incomplete_export_ranks_its_cause():
    report = ("After training I exported the weights, the tool wrote a single model.pth. Loading the folder with "
              "AutoModelForCausalLM.from_pretrained('exported/') raises OSError: Error no file named "
              "pytorch_model.bin, model.safetensors, tf_model.h5, model.ckpt.index or flax_model.msgpack found "
              "in directory exported/.")
    assert "save-export.export-folder-incomplete" in top3(report)


# --- save-export.adapter-vocab-mismatch -----------------------------------------------------------

ADAPTER_MISMATCH = ("RuntimeError: Error(s) in loading state_dict for PeftModelForCausalLM:\n"
                    "\tsize mismatch for base_model.model.model.embed_tokens.weight: copying a param with shape "
                    "torch.Size([151700, 3584]) from checkpoint, the shape in current model is torch.Size([151665, 3584]).")


def test_an_adapter_vocab_mismatch_is_read(kb):
    assert fact(kb, ADAPTER_MISMATCH, "export.adapter_vocab_mismatch") is True


def test_a_full_model_vocab_mismatch_is_not_an_adapter_one(kb):
    text = ("size mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([32001, 4096]) "
            "from checkpoint, the shape in current model is torch.Size([32000, 4096]).")
    assert fact(kb, text, "export.adapter_vocab_mismatch") is None


def test_an_adapter_vocab_mismatch_ranks_its_cause():
    report = ("I added 35 special tokens to the tokenizer and trained a LoRA on Qwen2.5-7B. Now "
              "PeftModel.from_pretrained(base, 'out/adapter') fails:\n" + ADAPTER_MISMATCH)
    assert "save-export.adapter-vocab-mismatch" in top3(report)


# --- repetition.base-model-as-chat ----------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "I am serving Mistral-7B not Mistral-7B-Instruct because I need the raw model",
    "we chat with the base model instead of the instruct one",
    "我用的是Llama-3-8B，不是Llama-3-8B-Instruct",
    "直接用base模型对话，回答停不下来",
])
def test_a_base_release_used_for_chat_is_read(kb, text):
    assert fact(kb, text, "model.base_used_for_chat") is True


@pytest.mark.parametrize("text", [
    "I fine-tuned the base model with LoRA on 5k conversations",
    "serving Qwen2-7B-Instruct with vLLM",
    "the base model's loss goes down normally",
])
def test_other_base_model_talk_is_not_chatting_with_it(kb, text):
    assert fact(kb, text, "model.base_used_for_chat") is None


def test_a_base_release_as_chat_ranks_its_cause():
    report = ("Serving Yi-6B not Yi-6B-Chat through the vLLM OpenAI server for a chatbot. Every answer goes on "
              "and on until max_tokens, it even writes the next user question itself. Changing eos_token in "
              "tokenizer_config.json did not help.")
    assert "repetition.base-model-as-chat" in top3(report)


# --- evidence refinements -------------------------------------------------------------------------

def test_a_package_name_error_points_at_the_release(kb):
    trace = ('  File "/opt/env/lib/python3.11/site-packages/sometool/merge.py", line 52, in main\n'
             "    model = dequant(model)\nNameError: name 'dequant' is not defined")
    assert fact(kb, trace, "export.tool_code_error") is True
    own = 'File "merge_my_lora.py", line 8\nNameError: name \'peft_model\' is not defined'
    assert fact(kb, own, "export.tool_code_error") is None


@pytest.mark.parametrize("text", [
    "the first token of the response is masked with -100, so the model never learns to start the answer",
    "回答的第一个token被mask了",
])
def test_a_masked_response_start_is_read(kb, text):
    assert fact(kb, text, "artifacts.response_start_masked") is True


def test_a_masked_prompt_is_not_a_masked_response_start(kb):
    assert fact(kb, "the prompt tokens are masked with -100 as usual", "artifacts.response_start_masked") is None


def test_a_tp_split_assert_with_tensor_parallelism_is_read(kb):
    text = "LLM(model=..., tensor_parallel_size=4)\nAssertionError: 25 is not divisible by 4"
    assert fact(kb, text, "tp.kv_heads_divisible") is False
    assert fact(kb, "AssertionError: 25 is not divisible by 4", "tp.kv_heads_divisible") is None


def test_an_unsupported_gguf_architecture_is_a_converter_mismatch(kb):
    assert fact(kb, "ERROR:hf-to-gguf:Model MyNewForCausalLM is not supported", "export.converter_rejects_layout") is True
    assert fact(kb, "INFO:hf-to-gguf:Model architecture: LlamaForCausalLM", "export.converter_rejects_layout") is None


def test_a_plain_convert_py_is_noticed(kb):
    assert fact(kb, "python llama.cpp/convert.py ./my-model --outtype f16", "export.legacy_convert_py") is True
    assert fact(kb, "python convert_hf_to_gguf.py ./my-model", "export.legacy_convert_py") is None


def test_a_missing_tokenizer_file_is_read(kb):
    text = "FileNotFoundError: File not found: /data/out/sft-merged/tokenizer.model"
    assert fact(kb, text, "export.tokenizer_files_missing") is True
    assert fact(kb, "loaded tokenizer.model from the base folder", "export.tokenizer_files_missing") is None


@pytest.mark.parametrize("text", [
    "the checkpoint was saved in torch_dist format (__0_0.distcp, common.pt)",
    "trained with NeMo 2.0 and got a Nemo 2.0 checkpoint with .distcp files",
    "pretrain_gpt.py ... --ckpt-format torch_dist",
])
def test_a_megatron_dist_checkpoint_is_read(kb, text):
    assert fact(kb, text, "export.megatron_dist_ckpt") is True


def test_an_fsdp_distcp_save_is_not_a_megatron_dist_checkpoint(kb):
    assert fact(kb, "FSDP SHARDED_STATE_DICT wrote __0_0.distcp files", "export.megatron_dist_ckpt") is None


def test_converting_a_torch_dist_checkpoint_points_at_the_converter(kb):
    text = ("Megatron-LM checkpoint saved in torch_dist format (__0_0.distcp, common.pt, metadata.json); "
            "tools/checkpoint/convert.py --loader mcore --saver llama2_hf fails to load it")
    ranked = _ranked(text)
    assert "save-export.converter-format-mismatch" in ranked[:3]
    assert ranked.index("save-export.converter-format-mismatch") < ranked.index("save-export.fsdp-sharded-state-dict")


@pytest.mark.parametrize("text", [
    "It seems like vLLM does not load the generation_config of Qwen2 correctly: repetition_penalty stays 1.0",
    "the `repetition_penalty` is not correctly set to `1.1` when using the vllm backend",
    "INFO Received request: SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, temperature=0.7)",
    "vllm 没有加载 generation_config 里的 repetition_penalty，一直重复",
])
def test_engine_sampling_defaults_are_read(kb, text):
    assert fact(kb, text, "repetition.engine_sampling_defaults") is True


@pytest.mark.parametrize("text", [
    "vLLM ignores eos_token_id from generation_config.json, so the end of turn is not respected",
    "SamplingParams(n=1, repetition_penalty=1.05, temperature=0.7)",
])
def test_engine_sampling_defaults_need_a_sampling_value(kb, text):
    assert fact(kb, text, "repetition.engine_sampling_defaults") is None


def test_a_vllm_loop_without_the_model_penalty_is_decoding(kb):
    text = ("Qwen2 gets stuck in an infinite loop with vLLM but not with transformers; "
            "vLLM does not load the generation_config, repetition_penalty=1.0 instead of 1.05")
    assert "repetition.decoding-params" in top3(text)
