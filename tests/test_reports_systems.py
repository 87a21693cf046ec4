"""How llmfix reads reports of crashes, hangs, slow runs and out-of-memory: the cases a table
(tests/text_cases/) cannot say -- which of two causes a report puts first, what a whole pasted
traceback or config sets, and near misses that must push a cause down. The reports are written for
these tests in the words public reports use."""
from __future__ import annotations

import pytest
from asking import entry, fact_value, ranked

from troubleshoot.evidence import extract

# --- system-failure ---------------------------------------------------------------------------


def test_the_trainer_error_for_a_missing_loss_is_recognised(shipped_kb, tmp_path):
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
    evidence = extract(shipped_kb, f"Traceback (most recent call last):\nValueError: {raised.value}")
    assert "trainer_no_loss" in {s.signature.id for s in evidence.signatures}
    assert evidence.facts["system.no_loss_returned"].value is True
    assert "trainer_no_loss" not in {
        s.signature.id for s in extract(shipped_kb, "the model returned a loss of 2.3 from the inputs").signatures}


def test_the_error_line_confirms_the_dtype_mismatch():
    assert entry("RuntimeError: expected scalar type Half but found Float",
                 "system-failure.dtype-mismatch")["status"] == "confirmed"


def test_a_crash_fixed_by_a_downgrade_counts_the_version_change_once():
    """docs/calibration.md, no double counting: the version items carry the change, the crash item
    only the crash (it was x6 on a conjunction repeating the version facts, on top of their x5 / x2.5)."""
    report = ("after upgrading deepspeed to 0.16.0 the job crashes at start-up with a RuntimeError in "
              "the engine; downgrading to deepspeed 0.15.4 fixes it")
    lines = entry(report, "system-failure.framework-regression")["evidence"]
    conditions = [line["condition"] for line in lines if line["fact"] != "text.words"]
    version_facts = ("dist.version_change_fixes", "train.after_upgrade", "dist.older_release_works")
    assert sum("system.crash_error" in c for c in conditions) == 1, conditions
    assert not any("system.crash_error" in c and any(v in c for v in version_facts) for c in conditions), conditions
    assert ranked(report)[0] == "system-failure.framework-regression"


def test_an_oom_without_the_flush_warning_stays_a_training_oom():
    report = "zero3 lora on 2x 4090: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB in the backward pass"
    top = ranked(report)
    assert top[0] == "system-failure.train-oom", top[:3]


def test_an_oom_at_the_first_step_is_not_a_leak():
    """A config too big for the GPU fails at once; the leak needs steps to grow."""
    top = ranked("full fine-tune of a 7B model on one 24 GB GPU, batch 8, seq 4096: torch.OutOfMemoryError: "
                 "CUDA out of memory at the very first step")
    assert top.index("system-failure.train-oom") < top.index("system-failure.graph-kept-across-steps"), top[:5]


def test_a_slow_run_without_offload_is_not_the_offload():
    top = ranked("training is very slow and GPU utilization is low; offload_optimizer device none, the dataloader is the bottleneck")
    assert top[0] == "system-failure.input-bound", top[:3]


def test_an_oom_on_consumer_cards_is_not_a_transport_failure():
    top = ranked("lora微调Llama-3.1-8B，用了4块4090，为什么每个GPU显存都要爆了")
    assert top[0] == "system-failure.train-oom", top[:3]



OOM_ON_GPU0 = ("torchrun --nproc_per_node 4 train.py dies while loading the model:\n"
               "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 500.00 MiB. GPU 0 has a total capacity "
               "of 23.65 GiB of which 41.06 MiB is free. {processes}")


def test_an_oom_that_lists_the_ranks_on_one_gpu_points_at_the_device_choice():
    """The OOM message lists every process holding memory on the GPU that ran out: four ranks of one
    torchrun job on GPU 0 is the ranks' device choice, not a model that does not fit."""
    report = OOM_ON_GPU0.format(processes=" ".join(f"Process {pid} has 5.80 GiB memory in use." for pid in range(7001, 7005)))
    assert ranked(report)[0] == "system-failure.every-rank-on-one-gpu", ranked(report)[:3]


def test_an_oom_of_one_process_stays_a_training_oom():
    report = OOM_ON_GPU0.format(processes="Including non-PyTorch memory, this process has 23.60 GiB memory in use.")
    top = ranked(report)
    assert "system-failure.every-rank-on-one-gpu" not in top[:3], top[:3]


def test_the_dispatcher_error_puts_the_streamed_batches_first():
    """accelerate's own message (DataLoaderDispatcher._fetch_batches) names the fault, not a transport."""
    report = ("streaming=True dataset, Trainer on 4 GPUs, dies at the first step:\n"
              "RuntimeError: You can't use batches of different size with `dispatch_batches=True` or when using an "
              "`IterableDataset`.either pass `dispatch_batches=False` and have each process fetch its own batch")
    assert ranked(report)[0] == "system-failure.streaming-dispatch-batches"


def test_a_streamed_run_that_times_out_later_is_not_the_dispatcher():
    """Streaming alone is a setting: a watchdog timeout thousands of steps in stays a collective timeout."""
    report = ("8 GPUs, streaming: true, max_steps 20000: after 6000 steps the job dies with Watchdog caught collective "
              "operation timeout: WorkNCCL(SeqNum=90211, OpType=ALLREDUCE) ran for 1800052 milliseconds before timing out")
    assert ranked(report)[0] != "system-failure.streaming-dispatch-batches", ranked(report)[:3]


def test_a_vocab_size_of_zero_after_a_zero3_resize_is_the_resize():
    report = ("added a pad token and called model.resize_token_embeddings(len(tokenizer)) with DeepSpeed ZeRO-3; "
              "printing model.config.vocab_size right after the resize shows vocab_size = 0 and training crashes")
    assert ranked(report)[0] == "system-failure.zero3-embedding-resize"



# --- eval-oom ---------------------------------------------------------------------------------


def test_growing_eval_memory_is_an_oom_partway_through(shipped_kb):
    for text in ("during the validation loop GPU memory keeps growing", "eval的时候显存会一直增加"):
        assert fact_value(shipped_kb, text, "evaloom.oom_moment") == "partway", text


def test_a_model_that_fits_one_gpu_points_at_the_eval_batch_not_the_copies():
    """Without a word about copies on every GPU, the new cause stays behind the usual suspects."""
    top = ranked("Trainer.evaluate runs out of CUDA memory on the first eval batch; per_device_eval_batch_size is "
                 "larger than the training batch")
    assert top.index("eval-oom.eval-batch-too-large") < top.index("eval-oom.model-copy-per-gpu"), top[:5]


