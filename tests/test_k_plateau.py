"""Causes from the survey of public plateau / bad-init threads: a framework upgrade that stops the
loss from falling, an adapter that is not an identity at step 0, tokens added with random rows,
and transformers 5's load report naming the decoder layers MISSING.

The texts are written for this test in the words such reports use; each new cause must rank in
the top 3 of `llmfix ask --no-input --json` without questions."""
from __future__ import annotations

import logging

import pytest
from asking import fact_value as _fact
from asking import ranked as _ranked

from troubleshoot.evidence import extract
from troubleshoot.knowledge import load


@pytest.fixture(scope="module")
def kb():
    return load()


@pytest.mark.parametrize("text, expected", [
    ("LoraConfig(r=8, lora_alpha=16, init_lora_weights=False, target_modules='all-linear')", True),
    ("init_lora_weights: False", True),
    ("in my own LoRA layer lora_B is not initialized to zero", True),
    ("我自己写的 lora，lora_B 没有初始化为0", True),
    ("LoraConfig(r=8, init_lora_weights=True)", None),           # the default: B at zero
    ("init_lora_weights='gaussian'", None),
    ("lora_B is all zeros after get_peft_model, as expected", None),
])
def test_random_adapter_init_is_read_from_configs_and_words(kb, text, expected):
    assert _fact(kb, text, "badinit.adapter_random_init") == expected


@pytest.mark.parametrize("text, expected", [
    ("before any update, the initial loss with the LoRA adapter is much higher than the base model", True),
    ("AdaLoRA on mistral: huge loss right after initialization", True),
    ("加上lora之后还没训练，初始loss就比原模型高很多", True),
    ("the initial loss is lower than the base model after one epoch", None),
    ("the loss is high at the start of pretraining", None),          # no adapter in sight
])
def test_adapter_start_loss_is_read_from_words(kb, text, expected):
    assert _fact(kb, text, "badinit.adapter_start_loss_high") == expected


@pytest.mark.parametrize("text, expected", [
    ('"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true}}', "cpu"),
    ('"offload_optimizer": {"device": "none"}, "offload_param": {"device": "cpu"}', "none"),   # params, not the optimizer
    ("deepspeed --deepspeed examples/deepspeed/ds_z3_offload_config.json", "cpu"),
    ("ZeRO-Infinity with the optimizer on NVMe: --offload_optimizer nvme", "nvme"),
    ("zero2 on 8 A100s", None),
])
def test_optimizer_offload_is_read_from_configs_and_words(kb, text, expected):
    assert _fact(kb, text, "dist.optimizer_offload_device") == expected


@pytest.mark.parametrize("text, expected", [
    ("after I turned off cpu offload the loss goes down", True),
    ("cpu_offload=False, it converges", True),
    ("关闭offload之后loss正常下降", True),
    ("with cpu offload the loss goes down fine", None),
    ("I never tried offload", None),
])
def test_convergence_without_offload_is_read_from_words(kb, text, expected):
    assert _fact(kb, text, "lossplateau.converges_without_offload") == expected


CASES = [
    ("after upgrading transformers to 4.57 the loss stopped decreasing; the same script and data trained fine "
     "before, and going back to 4.40 fixes it", "loss-plateau.framework-regression"),
    ("升级transformers之后loss不下降了，脚本和数据都没变", "loss-plateau.framework-regression"),
    ("after upgrading deepspeed to 0.12.2 the training loss is always 0 with zero3", "zero-loss.framework-regression"),
    ("LoRA fine-tune of qwen2 with init_lora_weights=False: the initial loss is much higher than the base model",
     "bad-init.adapter-not-identity"),
    ("AdaLoRA on llama-2-7b: high loss right after init, before a single training step", "bad-init.adapter-not-identity"),
    ("deepspeed zero2 with cpu offload, the loss is stuck at 4 and never goes down; after I turned off cpu offload "
     "it converges", "loss-plateau.optimizer-offload-bug"),
    ("ZeRO-3 cpu offload 微调 qwen loss不下降，关闭offload之后loss正常下降", "loss-plateau.optimizer-offload-bug"),
    ("I added 20 special tokens and called resize_token_embeddings; now the initial loss is far higher than before "
     "fine-tuning", "bad-init.new-token-init"),
]


@pytest.mark.parametrize("query, cause", CASES)
def test_new_cause_in_the_top_three(query, cause):
    ranked = _ranked(query)
    assert cause in ranked[:3], ranked[:5]


def test_an_unchanged_environment_does_not_point_at_a_regression():
    """Without an upgrade in the report the regression stays behind the usual plateau causes."""
    ranked = _ranked("qwen2 lora sft, the loss does not decrease at all after 3 epochs")
    assert "loss-plateau.framework-regression" not in ranked[:3], ranked[:5]


def test_a_full_finetune_from_scratch_does_not_blame_an_adapter():
    ranked = _ranked("pretraining a 1B model from scratch, the initial loss is 40 with a 32000 vocabulary")
    assert ranked[0] == "bad-init.std-too-large", ranked[:5]
    assert "bad-init.adapter-not-identity" not in ranked[:3], ranked[:5]


# --- transformers 5's load report, produced by a real from_pretrained on a tiny checkpoint ---

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


def test_missing_decoder_layers_in_the_load_report_mean_nothing_was_loaded(kb, tmp_path):
    report = _load_report(tmp_path, prefix="module.", head_class="LlamaForCausalLM")
    assert "MISSING" in report and "layers." in report, report   # the real report, not a paraphrase of it
    evidence = extract(kb, report)
    assert "hf_load_report_missing" in {s.signature.id for s in evidence.signatures}
    assert evidence.facts["lossplateau.weights_not_loaded"].value is True


def test_a_missing_classification_head_alone_is_expected(kb, tmp_path):
    report = _load_report(tmp_path, prefix="", head_class="LlamaForSequenceClassification")
    assert "MISSING" in report and "score.weight" in report, report
    evidence = extract(kb, report)
    assert "hf_load_report_missing" in {s.signature.id for s in evidence.signatures}
    assert "lossplateau.weights_not_loaded" not in evidence.facts


def test_the_load_report_ranks_the_unloaded_checkpoint_first(tmp_path):
    report = _load_report(tmp_path, prefix="module.", head_class="LlamaForCausalLM")
    ranked = _ranked("fine-tuning from my own checkpoint, the loss stays around 4.1 and does not go down\n" + report)
    assert ranked[0] == "loss-plateau.pretrained-not-loaded", ranked[:5]


def test_the_trainer_error_for_a_missing_loss_is_recognised(kb, tmp_path):
    """The real message, raised by Trainer.compute_loss when the batch carries no labels."""
    import torch
    import transformers

    config = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=2)
    model = transformers.LlamaForCausalLM(config)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    trainer = transformers.Trainer(model=model, args=args)
    batch = {"input_ids": torch.tensor([[1, 2, 3, 4]]), "attention_mask": torch.ones(1, 4, dtype=torch.long)}
    with pytest.raises(ValueError) as raised:
        trainer.compute_loss(model, batch)
    evidence = extract(kb, f"Traceback (most recent call last):\nValueError: {raised.value}")
    assert "trainer_no_loss" in {s.signature.id for s in evidence.signatures}
    assert evidence.facts["system.no_loss_returned"].value is True
    assert "trainer_no_loss" not in {
        s.signature.id for s in extract(kb, "the model returned a loss of 2.3 from the inputs").signatures}
