"""Knowledge from the session-10 survey (repetition, save-export, tp-mismatch, position-encoding,
moe-routing): two MoE causes the survey found uncovered (an aux-loss-free expert bias that nothing
updates, and DeepSpeed ZeRO-3 hanging on sparse MoE blocks), M-RoPE vision-language models
pointing at framework bugs in position handling, and a converter that fails on a reshape. Each
fact is read from text written for this test (with a near miss that must not set it), and each
new cause ranks in the top 3 of `llmfix ask --no-input --json` on a short report."""
from __future__ import annotations

import pytest
from asking import fact_value as fact
from asking import ranked

from troubleshoot.knowledge import load


@pytest.fixture(scope="module")
def kb():
    return load()


def top3(text: str) -> list[str]:
    return ranked(text)[:3]


# --- moe-routing.expert-bias-frozen ----------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "our DeepSeek-V3 fork uses auxiliary-loss-free load balancing",
    "the router adds e_score_correction_bias to the sigmoid scores",
    "--moe-router-enable-expert-bias --moe-router-topk 8",
    "这个模型用的是无辅助损失的负载均衡",
])
def test_bias_based_balancing_is_read(kb, text):
    assert fact(kb, text, "moerouting.expert_bias_routing") is True


@pytest.mark.parametrize("text", [
    "the expert bias is never updated during our SFT",
    "e_score_correction_bias stays constant for the whole run",
    "launched with --moe-router-bias-update-rate 0",
    "训练了两天，e_score_correction_bias 完全没有更新",
])
def test_a_static_expert_bias_is_read(kb, text):
    assert fact(kb, text, "moerouting.expert_bias_static") is True


@pytest.mark.parametrize("text", [
    "the bias of the lm_head is not updated because it is frozen",     # another bias
    "--moe-router-bias-update-rate 0.001",                            # a non-zero rate
    "the expert bias is updated after every optimizer step",
])
def test_other_bias_talk_is_not_a_static_expert_bias(kb, text):
    assert fact(kb, text, "moerouting.expert_bias_static") is None


def test_a_frozen_expert_bias_ranks_its_cause():
    report = ("Continued pre-training of a DeepSeek-V3 style MoE (noaux_tc routing) with the HF Trainer. "
              "After 3k steps a handful of experts take most tokens. I checked the router: "
              "e_score_correction_bias is exactly the value from the checkpoint, it never changed.")
    assert "moe-routing.expert-bias-frozen" in top3(report)


# --- moe-routing.zero3-expert-hang ------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "RuntimeError: still have inflight params [{'id': 412, 'status': 'INFLIGHT', 'numel': 0}]",
    "ZeRO-3 inference with Mixtral fails with InFlight params",
])
def test_zero3_inflight_params_is_read(kb, text):
    assert fact(kb, text, "moerouting.zero3_trace_error") is True
    assert fact(kb, text, "train.zero_stage") == 3


def test_the_trace_cache_notice_is_not_the_inflight_error(kb):
    text = "Invalidate trace cache @ step 0: expected module 1, but got module 0"
    assert fact(kb, text, "moerouting.zero3_trace_error") is None


@pytest.mark.parametrize("text", [
    "training hangs after the first few steps",
    "the job got stuck at step 12 and then NCCL timed out",
    "8卡训练到第10步就卡住了",
])
def test_a_hanging_run_is_read(kb, text):
    assert fact(kb, text, "moerouting.run_hangs") is True


@pytest.mark.parametrize("text", [
    "the hanging indent of the log output is odd",
    "training finished without problems",
])
def test_other_text_is_not_a_hang(kb, text):
    assert fact(kb, text, "moerouting.run_hangs") is None


def test_a_zero3_moe_hang_ranks_its_cause():
    report = ("Mixtral 8x7B MoE full fine-tune with DeepSpeed ZeRO-3: training hangs after a few steps, it looks "
              "like some experts get no tokens on one rank, then NCCL times out.")
    assert "moe-routing.zero3-expert-hang" in top3(report)


def test_the_inflight_error_on_an_moe_ranks_the_hang_cause():
    report = ("Mixtral 8x7B under ZeRO-3: the first batch runs, then "
              "RuntimeError: still have inflight params [{'id': 1203, 'status': 'AVAILABLE'}]")
    assert "moe-routing.zero3-expert-hang" in top3(report)


# --- position-encoding.framework-regression: M-RoPE models ------------------------------------------

@pytest.mark.parametrize("text", [
    "Qwen2-VL uses M-RoPE with 3D position ids",
    "rope_deltas is not carried into the decode steps",
    "the position ids come from get_rope_index",
    "训练代码里mrope的位置编码对不对",
])
def test_mrope_is_read(kb, text):
    assert fact(kb, text, "posenc.mrope") is True


@pytest.mark.parametrize("text", [
    "rope scaling with yarn factor 4",
    "the romper dataset has long rows",
])
def test_plain_rope_talk_is_not_mrope(kb, text):
    assert fact(kb, text, "posenc.mrope") is None


def test_mrope_positions_lost_in_training_rank_the_framework_regression():
    report = ("Fine-tuning Qwen2.5-VL-7B with my own loop I never pass position_ids. Grounding boxes come out "
              "shifted, and printing the ids inside the model shows plain 1D positions, not the 3D M-RoPE ids.")
    assert "position-encoding.framework-regression" in top3(report)


def test_a_lost_rope_delta_at_decode_ranks_the_repetition_regression():
    report = ("After upgrading mlx-vlm, Qwen2.5-VL repeats the same word endlessly whenever I give it an image; "
              "text-only chat is fine. The M-RoPE rope_deltas offset is lost at decode.")
    assert "repetition.framework-regression" in top3(report)


# --- save-export.converter-format-mismatch: a reshape that fails inside a converter -----------------

SHAPE_TRACE = """Traceback (most recent call last):
  File "/ws/toolkits/model_checkpoints_convertor/qwen/hf2mcore_qwen2_dense_and_moe_gqa.py", line 512, in <module>
    main()
  File "/ws/toolkits/model_checkpoints_convertor/qwen/hf2mcore_qwen2_dense_and_moe_gqa.py", line 470, in save_mgmodel
    viewed = v.view(args.num_query_groups, -1, head_dim, args.hidden_size)
RuntimeError: shape '[8, -1, 128, 3584]' is invalid for input of size 524288"""


def test_a_failed_reshape_in_a_converter_is_read(kb):
    assert fact(kb, SHAPE_TRACE, "export.converter_rejects_layout") is True


def test_the_same_reshape_error_in_training_is_not_a_converter(kb):
    text = SHAPE_TRACE.replace("toolkits/model_checkpoints_convertor/qwen/hf2mcore_qwen2_dense_and_moe_gqa.py",
                               "src/train_sft.py")
    assert fact(kb, text, "export.converter_rejects_layout") is None


def test_a_failed_reshape_in_a_converter_ranks_the_format_mismatch():
    report = "the checkpoint conversion script crashes before writing anything:\n" + SHAPE_TRACE
    assert "save-export.converter-format-mismatch" in top3(report)
