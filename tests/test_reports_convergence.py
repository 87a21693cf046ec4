"""How llmfix reads reports of losses that do not fall, gradients that do not flow, masks, preference
tuning and MoE routing: the cases a table (tests/text_cases/) cannot say -- which of two causes a
report puts first, what a whole pasted traceback or config sets, and near misses that must push a
cause down. The reports are written for these tests in the words public reports use."""
from __future__ import annotations

import logging

import pytest
from asking import causes, fact_value, ranked

from troubleshoot.evidence import extract


def _load_report(tmp_path, *, prefix: str, head_class: str) -> str:
    """Save a tiny Llama with its keys renamed by `prefix`, load it as `head_class`, return the warning text."""
    import torch
    import transformers
    from safetensors.torch import save_file

    config = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=2, num_labels=3, pad_token_id=0)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    model.save_pretrained(tmp_path)
    state = {prefix + k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})

    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logger = logging.getLogger("transformers")    # the library root: every module logger propagates to it
    handler = Keep()
    logger.addHandler(handler)
    try:
        getattr(transformers, head_class).from_pretrained(tmp_path)
    finally:
        logger.removeHandler(handler)
    return "\n".join(records)


# --- loss-plateau -----------------------------------------------------------------------------


def test_loss_at_ln_vocab_is_no_floor():
    text = "pretraining from scratch with a 32k vocab: the loss is stuck at 10.4 for 3000 steps, is this normal?"
    assert ranked(text)[0] != "loss-plateau.expected-loss-floor"


def test_an_unchanged_environment_does_not_point_at_a_regression():
    """Without an upgrade in the report the regression stays behind the usual plateau causes."""
    top = ranked("qwen2 lora sft, the loss does not decrease at all after 3 epochs")
    assert "loss-plateau.framework-regression" not in top[:3], top[:5]


def test_missing_decoder_layers_in_the_load_report_mean_nothing_was_loaded(shipped_kb, tmp_path):
    report = _load_report(tmp_path, prefix="module.", head_class="LlamaForCausalLM")
    assert "MISSING" in report and "layers." in report, report   # the real report, not a paraphrase of it
    evidence = extract(shipped_kb, report)
    assert "hf_load_report_missing" in {s.signature.id for s in evidence.signatures}
    assert evidence.facts["lossplateau.weights_not_loaded"].value is True


def test_a_missing_classification_head_alone_is_expected(shipped_kb, tmp_path):
    report = _load_report(tmp_path, prefix="", head_class="LlamaForSequenceClassification")
    assert "MISSING" in report and "score.weight" in report, report
    evidence = extract(shipped_kb, report)
    assert "hf_load_report_missing" in {s.signature.id for s in evidence.signatures}
    assert "lossplateau.weights_not_loaded" not in evidence.facts


def test_the_load_report_ranks_the_unloaded_checkpoint_first(tmp_path):
    report = _load_report(tmp_path, prefix="module.", head_class="LlamaForCausalLM")
    top = ranked("fine-tuning from my own checkpoint, the loss stays around 4.1 and does not go down\n" + report)
    assert top[0] == "loss-plateau.pretrained-not-loaded", top[:5]


# --- no-grad-flow -----------------------------------------------------------------------------


def test_lora_checkpoint_warning_without_frozen_branch_still_points_at_gc_inputs():
    text = ("LoRA on Llama-2-7b with gradient_checkpointing=True: None of the inputs have requires_grad=True. "
            "Gradients will be None, and lora_B stays all zeros after 500 steps.")
    assert ranked(text)[0] == "no-grad-flow.gc-frozen-embeddings"


def test_peft_version_regression_ranks_first_three():
    top = ranked("After upgrading peft to 0.7.1, get_peft_model(model, config, adapter_name='sql') prints "
                     "trainable params: 0 and backward fails with element 0 of tensors does not require grad. "
                     "Going back to peft 0.6.2 fixes it.")
    assert "no-grad-flow.framework-regression" in top[:3]


def test_a_lora_run_that_does_not_learn_keeps_the_checkpointing_fault_first():
    """The warning with a flat loss and zero adapters is the real fault, not the benign warning."""
    top = ranked("LoRA on Llama-3-8B with gradient_checkpointing=True: UserWarning: None of the inputs have "
                 "requires_grad=True. Gradients will be None, and the loss stays flat, lora_B is still all zeros.")
    assert top[0] == "no-grad-flow.gc-frozen-embeddings", top[:3]


def test_a_question_about_the_warning_does_not_confirm_the_checkpointing_fault():
    """Asking whether the warning matters is strong evidence against a run that learns nothing."""
    found = {c["id"]: c for c in causes("LoRA fine-tune prints UserWarning: None of the inputs have requires_grad=True. "
                                        "Gradients will be None. Is there any problem if I just ignore this warning?")}
    assert found["no-grad-flow.gc-frozen-embeddings"]["status"] != "confirmed"


# --- data-artifacts ---------------------------------------------------------------------------


def test_literal_backslash_n_stays_escape_characters():
    top = ranked("after sft the model prints a literal \\n instead of line breaks in every answer")
    assert top[0] == "data-artifacts.escape-characters", top[:3]


# --- mask-error -------------------------------------------------------------------------------


def test_a_mask_that_broke_with_a_release_is_a_regression():
    top = ranked("packing with a custom 4D attention mask worked on transformers 4.40; after upgrading to 4.43 "
                     "the loss is much worse, and pinning 4.40 fixes it")
    assert "mask-error.framework-regression" in top[:3], top[:5]


GEMMA3_TOKEN_TYPE_TRACE = """  File "/opt/venv/lib/python3.12/site-packages/transformers/models/gemma3/modeling_gemma3.py", line 780, in create_causal_mask_mapping
    raise ValueError("`token_type_ids` is required as a model input when training")
ValueError: `token_type_ids` is required as a model input when training"""


def test_the_gemma3_token_type_ids_error_is_read_and_points_at_the_release(shipped_kb):
    """The pasted trace sets the fact through its signature, and the mask regression leads."""
    found = [s.signature.id for s in extract(shipped_kb, GEMMA3_TOKEN_TYPE_TRACE).signatures]
    assert "gemma3_token_type_ids_required" in found
    top = ranked(f"QLoRA SFT of gemma-3-12b-it with unsloth on plain text crashes at step 1:\n{GEMMA3_TOKEN_TYPE_TRACE}")
    assert top[0] == "mask-error.framework-regression", top[:3]


def test_a_token_type_ids_question_without_the_error_sets_nothing(shipped_kb):
    assert fact_value(shipped_kb, "how does BERT use token_type_ids for sentence pairs?", "mask.token_type_ids_required") is None


TRL_PADDING_FREE_WARNING = ("UserWarning: Padding-free training is enabled, but the attention implementation is not set to "
                            "'flash_attention_2'. Padding-free training flattens batches into a single sequence, and "
                            "'flash_attention_2' is the only known attention mechanism that reliably supports this.")


def test_padding_free_without_flash_attention_points_at_packed_samples_attending_each_other(shipped_kb):
    found = [s.signature.id for s in extract(shipped_kb, TRL_PADDING_FREE_WARNING).signatures]
    assert "trl_padding_free_without_flash_attention" in found
    top = ranked("SFT of Qwen2.5-1.5B with TRL SFTConfig(padding_free=True) and sdpa: the train loss starts much "
                 f"higher than the padded run.\n{TRL_PADDING_FREE_WARNING}")
    assert top[0] == "mask-error.packing-cross-attention", top[:3]


def test_fa2_cache_right_padding_ranks_first_three_and_generation_stays_padding_side():
    error = ("ValueError: You are attempting to perform batched generation with padding_side='right' this may "
             "lead to unexpected behaviour for Flash Attention version of Qwen2. Make sure to call "
             "`tokenizer.padding_side = 'left'` before tokenizing the input.")
    training = ranked(f"GRPOTrainer on Qwen2.5-1.5B with attn_implementation flash_attention_2 crashes in "
                       f"_get_per_token_logps:\n{error}")
    assert "mask-error.fa2-cache-right-padding" in training[:3]
    generating = ranked(f"outputs = model.generate(**batch, max_new_tokens=64) on 8 prompts raises\n{error}")
    assert generating.index("mask-error.padding-side") < generating.index("mask-error.fa2-cache-right-padding")


# --- preference-divergence --------------------------------------------------------------------


def test_a_reward_that_climbs_while_answers_worsen_stays_reward_hacking():
    """A reward that works and is exploited is not a reward that never fires."""
    top = ranked("GRPO: the reward keeps climbing while the answers get longer and worse, the policy found a loophole")
    assert top[0] != "preference-divergence.reward-never-fires", top[:3]


def test_wrong_answers_growing_longer_point_at_the_length_bias():
    top = ranked("verl GRPO with loss_agg_mode=seq-mean-token-mean on math: the wrong answers get longer and "
                     "longer while accuracy stays flat")
    assert "preference-divergence.length-normalization-bias" in top[:3], top[:5]


# --- moe-routing ------------------------------------------------------------------------------


def test_a_doubled_aux_loss_is_ranked():
    top = ranked("Qwen3-30B-A3B SFT with TRL: the aux loss is added twice, once by the model and once by SFTTrainer, "
                     "so the experts are balanced too hard")
    assert "moe-routing.aux-loss-double-counted" in top[:3], top[:5]


def test_an_inert_balancing_loss_ranks_the_broken_aux_loss_first():
    causes = ranked("Fine-tuning an MoE model: the load balancing loss never helps, I printed it and the "
                    "balancing loss function always returns a constant")
    assert causes[0] == "moe-routing.aux-loss-broken"


@pytest.mark.parametrize("text", [
    "RuntimeError: still have inflight params [{'id': 412, 'status': 'INFLIGHT', 'numel': 0}]",
    "ZeRO-3 inference with Mixtral fails with InFlight params",
])
def test_zero3_inflight_params_is_read(shipped_kb, text):
    assert fact_value(shipped_kb, text, "moerouting.zero3_trace_error") is True
    assert fact_value(shipped_kb, text, "train.zero_stage") == 3


def test_the_trace_cache_notice_is_not_the_inflight_error(shipped_kb):
    text = "Invalidate trace cache @ step 0: expected module 1, but got module 0"
    assert fact_value(shipped_kb, text, "moerouting.zero3_trace_error") is None


