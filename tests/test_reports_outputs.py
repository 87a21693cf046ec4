"""How llmfix reads reports of generation that repeats, exports and conversions, tensor-parallel
mismatches and positions: the cases a table (tests/text_cases/) cannot say -- which of two causes a
report puts first, what a whole pasted traceback or config sets, and near misses that must push a
cause down. The reports are written for these tests in the words public reports use."""
from __future__ import annotations

import pytest
from asking import entry, fact_value, ranked

from troubleshoot.evidence import extract

CONVERTER_TRACE = """Traceback (most recent call last):
  File "/work/tools/ckpt/convert_megatron_to_hf.py", line 311, in <module>
    main()
  File "/work/tools/ckpt/convert_megatron_to_hf.py", line 288, in convert
    hf_name = name_map[op_name]
KeyError: 'self_attention.linear_qkv.layer_norm_weight'"""

ADAPTER_MISMATCH = ("RuntimeError: Error(s) in loading state_dict for PeftModelForCausalLM:\n"
                    "\tsize mismatch for base_model.model.model.embed_tokens.weight: copying a param with shape "
                    "torch.Size([151700, 3584]) from checkpoint, the shape in current model is torch.Size([151665, 3584]).")


# --- repetition -------------------------------------------------------------------------------


def test_loops_that_an_older_vllm_does_not_make_are_a_regression():
    top = ranked("since upgrading vllm to 0.11 our fine-tuned qwen repeats the same sentence until max_tokens; "
                     "rolling back to vllm 0.10.2 fixes it")
    assert "repetition.framework-regression" in top[:3], top[:5]


def test_loops_without_a_version_story_stay_with_the_eos_causes():
    top = ranked("my fine-tuned llama repeats the same sentence and never stops")
    assert "repetition.framework-regression" not in top[:3], top[:5]


def test_untrained_template_tokens_step_back_when_embeddings_are_trained():
    cause = "repetition.untrained-special-tokens"
    plain = entry("Qwen2.5-1.5B-Base LoRA with template: qwen never stops generating", cause)["posterior"]
    trained = entry("Qwen2.5-1.5B-Base LoRA with template: qwen never stops generating, "
                         "save_embedding_layers=True", cause)["posterior"]
    assert trained < plain / 2


# --- save-export ------------------------------------------------------------------------------


def test_a_head_that_differs_after_saving_is_a_broken_tie_not_an_extra_head():
    """Without the engine's KeyError, a tied head that changed on save stays with the broken tie."""
    top = ranked("after save_pretrained and reload, lm_head differs from embed_tokens although tie_word_embeddings is true")
    assert top[0] != "save-export.extra-lm-head-weight", top[:3]


def test_a_converter_that_stops_on_a_tensor_name_is_read(shipped_kb):
    assert fact_value(shipped_kb, CONVERTER_TRACE, "export.converter_rejects_layout") is True


def test_a_converter_script_is_noticed(shipped_kb):
    assert fact_value(shipped_kb, "ran hf2mcore_qwen2.5_convertor.sh and then the mcore2hf direction", "export.ran_converter") is True
    assert fact_value(shipped_kb, "ran python scripts/convert_to_hf.py on the NeMo checkpoint", "export.ran_converter") is True
    assert fact_value(shipped_kb, "the conversation template is fine", "export.ran_converter") is None


@pytest.mark.parametrize("frame, seen", [
    ('  File "/ws/Megatron-LM/tools/checkpoint/convert_megatron_gpt2_checkpoint.py", line 212, in main', True),
    ('  File "/ws/DeepSpeed/deepspeed_to_transformers.py", line 41, in <module>', True),
    ('  File "/ws/Pai-Megatron-Patch/toolkits/hf2mcore_qwen2.py", line 88, in convert', True),
    ('  File "/ws/train.py", line 88, in main', False),
    ('  File "/ws/utils/to_hf_hub.py", line 3, in push', False),
])
def test_a_traceback_through_a_conversion_script_is_noticed(shipped_kb, frame, seen):
    ids = [s.signature.id for s in extract(shipped_kb, frame).signatures]
    assert ("conversion_script_traceback" in ids) is seen, ids


def test_a_conversion_that_ran_and_talks_nonsense_is_a_layout_not_the_wrong_converter():
    """A converter meant for another format stops; one that ran and gives gibberish lays weights out wrongly."""
    top = ranked("Converted my fine-tuned llama-2-13b with llama.cpp convert.py and quantised it to q4_0; both steps "
                 "finish without errors but the gguf model only produces gibberish, while the HF model answers fine")
    assert top[0] == "save-export.conversion-rope-permute", top[:3]
    assert top.index("save-export.converter-format-mismatch") > 2, top[:5]


def test_an_adapter_vocab_mismatch_is_read(shipped_kb):
    assert fact_value(shipped_kb, ADAPTER_MISMATCH, "export.adapter_vocab_mismatch") is True


def test_a_full_model_vocab_mismatch_is_not_an_adapter_one(shipped_kb):
    text = ("size mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([32001, 4096]) "
            "from checkpoint, the shape in current model is torch.Size([32000, 4096]).")
    assert fact_value(shipped_kb, text, "export.adapter_vocab_mismatch") is None


def test_a_package_name_error_points_at_the_release(shipped_kb):
    trace = ('  File "/opt/env/lib/python3.11/site-packages/sometool/merge.py", line 52, in main\n'
             "    model = dequant(model)\nNameError: name 'dequant' is not defined")
    assert fact_value(shipped_kb, trace, "export.tool_code_error") is True
    own = 'File "merge_my_lora.py", line 8\nNameError: name \'peft_model\' is not defined'
    assert fact_value(shipped_kb, own, "export.tool_code_error") is None


def test_an_unsupported_gguf_architecture_is_a_converter_mismatch(shipped_kb):
    assert fact_value(shipped_kb, "ERROR:hf-to-gguf:Model MyNewForCausalLM is not supported", "export.converter_rejects_layout") is True
    assert fact_value(shipped_kb, "INFO:hf-to-gguf:Model architecture: LlamaForCausalLM", "export.converter_rejects_layout") is None


def test_a_plain_convert_py_is_noticed(shipped_kb):
    assert fact_value(shipped_kb, "python llama.cpp/convert.py ./my-model --outtype f16", "export.legacy_convert_py") is True
    assert fact_value(shipped_kb, "python convert_hf_to_gguf.py ./my-model", "export.legacy_convert_py") is None


def test_a_missing_tokenizer_file_is_read(shipped_kb):
    text = "FileNotFoundError: File not found: /data/out/sft-merged/tokenizer.model"
    assert fact_value(shipped_kb, text, "export.tokenizer_files_missing") is True
    assert fact_value(shipped_kb, "loaded tokenizer.model from the base folder", "export.tokenizer_files_missing") is None


def test_converting_a_torch_dist_checkpoint_points_at_the_converter(shipped_kb):
    text = ("Megatron-LM checkpoint saved in torch_dist format (__0_0.distcp, common.pt, metadata.json); "
            "tools/checkpoint/convert.py --loader mcore --saver llama2_hf fails to load it")
    top = ranked(text)
    assert "save-export.converter-format-mismatch" in top[:3]
    assert top.index("save-export.converter-format-mismatch") < top.index("save-export.fsdp-sharded-state-dict")


SHAPE_TRACE = """Traceback (most recent call last):
  File "/ws/toolkits/model_checkpoints_convertor/qwen/hf2mcore_qwen2_dense_and_moe_gqa.py", line 512, in <module>
    main()
  File "/ws/toolkits/model_checkpoints_convertor/qwen/hf2mcore_qwen2_dense_and_moe_gqa.py", line 470, in save_mgmodel
    viewed = v.view(args.num_query_groups, -1, head_dim, args.hidden_size)
RuntimeError: shape '[8, -1, 128, 3584]' is invalid for input of size 524288"""


def test_a_failed_reshape_in_a_converter_is_read(shipped_kb):
    assert fact_value(shipped_kb, SHAPE_TRACE, "export.converter_rejects_layout") is True


def test_the_same_reshape_error_in_training_is_not_a_converter(shipped_kb):
    text = SHAPE_TRACE.replace("toolkits/model_checkpoints_convertor/qwen/hf2mcore_qwen2_dense_and_moe_gqa.py",
                               "src/train_sft.py")
    assert fact_value(shipped_kb, text, "export.converter_rejects_layout") is None



def test_a_zero3_run_whose_save_stops_on_the_generation_config_is_not_an_empty_zero3_save():
    """ZeRO-3 in the launch line lifts the empty-shard save; the save's own ValueError names the
    generation config, so that cause comes first and is the confirmed one."""
    report = ("finetuning vicuna-7b-v1.5 with deepspeed --deepspeed ./scripts/zero3.json: training finishes, then "
              "the model save fails\n  File \"/opt/conda/lib/python3.10/site-packages/transformers/generation/"
              "configuration_utils.py\", line 560, in save_pretrained\n    raise ValueError(\nValueError: The "
              "generation config instance is invalid -- `.validate()` throws warnings and/or exceptions. Fix these "
              "issues to save the configuration.")
    top = ranked(report)
    assert top[0] == "save-export.generation-config-invalid", top[:3]
    assert entry(report, "save-export.generation-config-invalid")["status"] == "confirmed"


def test_a_missing_adapter_bin_next_to_a_pytorch_model_bin_is_not_the_safetensors_rename():
    """'no adapter_model.bin' alone is also what a ZeRO-3 LoRA save that wrote pytorch_model.bin says;
    only with adapter_model.safetensors in the folder is it PEFT's new file name."""
    renamed = ("LoRA 训练完成后输出目录里有 adapter_config.json 和 adapter_model.safetensors，没有生成 adapter_model.bin，"
               "合并脚本读不到")
    assert ranked(renamed)[0] == "save-export.adapter-safetensors-not-bin", ranked(renamed)[:3]
    zero3 = "deepspeed zero3 训练 lora 之后只有 pytorch_model.bin，运行 zero_to_fp32.py 转换后也没有 adapter_model.bin"
    assert ranked(zero3)[0] != "save-export.adapter-safetensors-not-bin", ranked(zero3)[:3]


def test_a_converter_that_counts_another_vocabulary_is_the_size_mismatch_not_untrained_tokens():
    """The converter's refusal is about counts; untrained new-token rows would convert and answer badly."""
    report = ("merged the LoRA into Llama-2-7b and converted with llama.cpp convert.py:\n"
              "Exception: Vocab size mismatch (model has 32000, but merged/tokenizer.model has 32001).")
    top = ranked(report)
    assert top[0] == "save-export.tokenizer-embedding-size-mismatch", top[:3]


def test_a_model_ollama_cannot_load_is_not_a_missing_template():
    """A template changes what a loaded model answers; a load refused over the vocabulary is the export."""
    report = ("fine-tuned Llama-3-8B with LLaMA-Factory, exported, then ollama create and ollama run:\n"
              "Error: llama runner process has terminated: error loading model: check_tensor_dims: tensor "
              "'token_embd.weight' has wrong shape; expected  4096, 128257, got  4096, 128256,     1,     1")
    top = ranked(report)
    assert top[0] == "save-export.tokenizer-embedding-size-mismatch", top[:3]


def test_the_loader_shape_error_reads_as_a_vocabulary_mismatch(shipped_kb):
    line = ("llama_model_load: error loading model: check_tensor_dims: tensor 'token_embd.weight' has wrong shape; "
            "expected  4096, 128257, got  4096, 128256,     1,     1")
    assert fact_value(shipped_kb, line, "export.vocab_size_mismatch") is True
    assert fact_value(shipped_kb, "tensor 'blk.0.attn_q.weight' has wrong shape", "export.vocab_size_mismatch") is None



# --- tp-mismatch ------------------------------------------------------------------------------


def test_a_tp_split_assert_with_tensor_parallelism_is_read(shipped_kb):
    text = "LLM(model=..., tensor_parallel_size=4)\nAssertionError: 25 is not divisible by 4"
    assert fact_value(shipped_kb, text, "tp.kv_heads_divisible") is False
    assert fact_value(shipped_kb, "AssertionError: 25 is not divisible by 4", "tp.kv_heads_divisible") is None


def test_a_tp_gap_in_every_release_is_not_a_regression():
    """Without a release boundary, wrong TP output stays with the parallel layers, not the engine release."""
    top = ranked("my own column parallel and row parallel layers give a wrong loss with tp=2, tp=1 is correct")
    assert top[0] != "tp-mismatch.framework-regression", top[:3]


# --- position-encoding ------------------------------------------------------------------------


def test_a_valid_rope_scaling_dict_is_not_the_refusal(shipped_kb):
    text = 'rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}'
    assert fact_value(shipped_kb, text, "posenc.rope_scaling_unparsed") is None


def test_rope_positions_of_packed_documents_are_ranked():
    top = ranked("sample packing in our own trainer: RoPE ignores the position ids, each packed document keeps "
                     "counting from where the previous one ended")
    assert "position-encoding.position-ids-ignored" in top[:3], top[:5]


def test_tokenizer_length_warning_ranks_first_three_and_a_crash_pushes_it_down():
    warning = ("Token indices sequence length is longer than the specified maximum sequence length for this "
               "model (1877 > 1024). Running this sequence through the model will result in indexing errors")
    alone = ranked(f"While tokenizing my dataset for gpt2 continued pretraining I see {warning}. "
                    "Should I worry about it?")
    assert "position-encoding.tokenizer-length-warning" in alone[:3]
    crashed = ranked(f"{warning}\n    position_embeds = self.wpe(position_ids)\nIndexError: index out of range in self")
    assert crashed.index("position-encoding.absolute-positions-exceeded") < crashed.index(
        "position-encoding.tokenizer-length-warning")


@pytest.mark.parametrize("text, expected", [
    ('  File "modeling_bert.py", line 238, in forward\n    embeddings += position_embeddings\n'
     "RuntimeError: The size of tensor a (700) must match the size of tensor b (512) at non-singleton dimension 1",
     True),
    ("embeddings += position_embeddings", None),               # the code line alone: no failure
])
def test_bert_position_add_mismatch_sets_the_index_error(shipped_kb, text, expected):
    assert fact_value(shipped_kb, text, "posenc.index_error") == expected
    assert fact_value(shipped_kb, text, "posenc.learned_absolute") is True


