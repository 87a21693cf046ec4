"""Words a report shares with a cause's description reorder its causes, and never decide.

evidence/lexical.py; docs/knowledge-format.md, "Words shared with a cause".
"""
from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from troubleshoot import cli
from troubleshoot.diagnosis import WORDS
from troubleshoot.engine import diagnose
from troubleshoot.evidence import lexical
from troubleshoot.knowledge.loading import load


@pytest.fixture(scope="module")
def kb():
    return load()


def ask(text: str) -> dict:
    result = CliRunner().invoke(cli.main, ["ask", "--no-input", "--json", "--top", "50", text])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def words_line(cause: dict) -> dict | None:
    return next((e for e in cause["evidence"] if e["fact"] == WORDS), None)


def rank(data: dict, cid: str) -> int:
    return [c["id"] for c in data["causes"]].index(cid) + 1


def score(data: dict, cid: str) -> float:
    return next(c["score"] for c in data["causes"] if c["id"] == cid)


def test_the_cause_whose_words_the_report_uses_rises_above_its_siblings():
    """The decoding cause has nothing but its words to go on here ("beam search", "no
    repetition_penalty"), and they put it first; the EOS causes' words do the same for them."""
    decoding = ask("the fine-tuned model repeats the same sentence; I decode with beam search, "
                   "num_beams=4, no repetition_penalty, no no_repeat_ngram_size")
    eos = ask("the fine-tuned model repeats the same sentence; the eos token is not in the labels "
              "of my training data")
    cid = "repetition.decoding-params"
    assert rank(decoding, cid) == 1 and rank(eos, cid) > 1
    assert score(decoding, cid) > 2 * score(eos, cid)
    line = words_line(next(c for c in decoding["causes"] if c["id"] == cid))
    assert line["factor"] > 1 and {"beam", "repetition_penalty", "penalty"} & set(line["value"])


def test_words_never_set_a_status(kb):
    """A cause moved by nothing but words stays untested, whatever its factor."""
    data = ask("greedy beam search num_beams repetition_penalty no_repeat_ngram_size: the model repeats")
    for cause in data["causes"]:
        moved = [e for e in cause["evidence"] if e["fact"] != WORDS and e["factor"] != 1]
        if not moved and cause["id"] not in {c for c in data["causes"][0].get("same_fault", [])}:
            assert cause["status"] == "untested", cause["id"]
    assert any(words_line(c) and words_line(c)["factor"] > 1 for c in data["causes"])


def test_the_factor_is_bounded_and_centred(kb):
    causes = [c.id for c in kb.symptoms["nan-loss"].causes]
    got = lexical.overlaps(kb, "loss became nan with fp16 after the loss scale went down to its "
                               "minimum; the model was pretrained in bfloat16", causes)
    factors = [o.factor for o in got.values()]
    assert set(got) == set(causes)
    assert all(1 / lexical.CAP - 1e-9 <= f <= lexical.CAP + 1e-9 for f in factors)
    assert min(factors) < 1 < max(factors)
    best = max(got, key=lambda cid: got[cid].factor)
    assert "fp16" in best or "bf16" in best or "scale" in best, best


def test_words_shared_by_no_cause_change_nothing(kb):
    causes = [c.id for c in kb.symptoms["nan-loss"].causes]
    assert all(o.factor == 1 for o in lexical.overlaps(kb, "zxqv wplk", causes).values())
    assert lexical.overlaps(kb, "loss nan", causes[:1]) == {}


def test_a_probe_report_has_no_words(kb):
    diag = diagnose(kb, {"nan-loss": 0.9})
    assert all(e.fact != WORDS for c in diag.causes for e in c.evidence)


def test_the_shown_score_includes_the_factor_and_why_says_so():
    data = ask("model never stops generating, I set pad_token = eos_token in the collator")
    cause = next(c for c in data["causes"] if words_line(c))
    line = words_line(cause)
    assert "text.words" in cause["why"]
    others = math.prod(e["factor"] for e in {e["condition"]: e for e in cause["evidence"]}.values())
    odds = cause["prior"] / (1 - cause["prior"]) * others
    assert cause["posterior"] == pytest.approx(odds / (1 + odds), abs=1e-3)
    assert line["from"] == "text" and line["holds"] is True
    assert all(word in data["query"].lower() for word in line["span"].split(" … "))


@pytest.mark.parametrize("text", ["训练时 loss 变成 nan，用的是 fp16，模型是 bf16 预训练的",
                                  "\x00\x01 nan " * 2_000_000, "loss nan " + "x" * 10_000_000])
def test_chinese_binary_and_huge_reports_are_scored(kb, text):
    causes = [c.id for c in kb.symptoms["nan-loss"].causes]
    got = lexical.overlaps(kb, text, causes)
    assert all(1 / lexical.CAP - 1e-9 <= o.factor <= lexical.CAP + 1e-9 for o in got.values())


def terminal(text: str) -> str:
    return CliRunner().invoke(cli.main, ["ask", "--no-input", "--top", "5", text]).output


def test_the_terminal_shows_words_only_when_no_fact_moved_the_cause():
    worded = terminal("the model repeats the same sentence; beam search, num_beams=4, no repetition_penalty")
    assert "Words in common with it: " in worded.split("repetition.decoding-params")[1].split("\n  2.")[0]
    fact = terminal("the model repeats the same sentence with greedy decoding")
    first = fact.split("repetition.decoding-params")[1].split("\n  2.")[0]
    assert "Words in common" not in first and "repetition.greedy_decoding" in first


def test_command_line_flags_are_settings_not_words(kb):
    causes = [c.id for c in kb.symptoms["system-failure"].causes]
    plain = lexical.overlaps(kb, "CUDA out of memory after a while", causes)
    flagged = lexical.overlaps(kb, "CUDA out of memory after a while\n  --lora_rank 4 --save_steps 200 "
                                   "--remove_unused_columns -p 8", causes)
    assert {cid: o.factor for cid, o in plain.items()} == {cid: o.factor for cid, o in flagged.items()}


def test_words_do_not_move_a_cause_the_evidence_decided():
    """A ruled-out cause keeps its score whatever words it shares: evidence decided it."""
    text = ("repeats the same sentence with beam search and no repetition_penalty; "
            "the base model before fine-tuning does not loop with the same settings")
    data = CliRunner().invoke(cli.main, ["ask", "--no-input", "--json", "--top", "50", text,
                                         "--answer", "repetition.greedy_decoding=no",
                                         "--answer", "repetition.base_model_repeats=no"])
    causes = json.loads(data.stdout)["causes"]
    decoding = next(c for c in causes if c["id"] == "repetition.decoding-params")
    assert decoding["status"] == "ruled-out" and words_line(decoding) is None


def test_a_description_keeps_only_the_fact_words_that_support_the_cause():
    """Reward hacking reads the algorithm in ["ppo", "grpo", "rloo"]: "GRPO" describes it, and
    "DPO", a spelling of the same fact with a value it does not test, does not."""
    kb = load()
    words = lexical.description(kb, kb.causes["preference-divergence.reward-hacking"]).split("\n")
    assert "GRPO" in words and "PPOTrainer" in words
    assert "DPO" not in words and "DPOTrainer" not in words


def test_a_pasted_launch_script_is_settings_not_words(kb):
    """A verl launch script's Hydra overrides and the environment it sets ("node", "save",
    "timeout", "memory") are no words of the story: the report below shares them with the
    collective-timeout and rollout-memory causes only through the script, and they stop counting."""
    causes = [c.id for sid in ("system-failure", "preference-divergence") for c in kb.symptoms[sid].causes]
    script = ("NCCL_DEBUG=WARN VLLM_USE_V1=1 python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo \\\n"
              "  actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.gpu_memory_utilization=0.5 \\\n"
              "  trainer.n_gpus_per_node=8 trainer.nnodes=2 trainer.save_freq=50 ray_init.timeout=3600 \\\n"
              "  trainer.default_local_dir=ckpt save_steps=100\n")
    story = "verl GRPO: the reward stays flat for 300 steps and the validation score does not move"
    got = lexical.overlaps(kb, f"{story}\n{script}", causes)
    assert got["system-failure.nccl-timeout"].factor <= 1 and got["system-failure.rollout-engine-memory"].factor <= 1
    assert max(got, key=lambda cid: got[cid].factor).startswith("preference-divergence.")
    shared = {word for o in got.values() for word in o.words}
    assert not shared & {"node", "nnodes", "save", "timeout", "memory", "utilization", "rollout"}
