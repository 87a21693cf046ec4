"""Statuses, symptoms and ranking defined by evidence (issue 12 item 1, issue 13 item 3).

Each rule on a minimal knowledge tree where the numbers can be checked by hand:
``untested`` until a factor other than 1 applied; ``ruled-out`` only when factors below 1 put the
score under 0.05; causes sorted by the score shown (symptom weight × posterior); a symptom listed
only on evidence; no question about a fact that has no value or a symptom the artifacts contradict.
"""
import math

import pytest
from asking import causes

from troubleshoot.engine import MATCH_TEMPERATURE, OBSERVED_LEAD, RULED_OUT, diagnose, twins
from troubleshoot.knowledge.read import load_with_problems
from troubleshoot.observations import Fact, Observations

# A second symptom beside the mini tree's nan-loss: a high prior, so that only its weight keeps it
# behind nan-loss's causes; and its own check on nanloss.early (the NaN-timing question).
SPIKE = """\
id: loss-spike
title: Loss spikes
summary: The loss jumps.
aliases:
  en: [loss spikes]
observed_when: [logs.spike == true]
contradicted_when: logs.spike == false
checks:
  - fact: nanloss.early
    ask: Did a NaN come within the first 100 steps?
causes:
  - id: loss-spike.lr-peak
    title: LR peak
    prior: 0.45
    evidence:
      - when: nanloss.early
        lr: 2
    fixes: [fix-lower-lr]
    sources: ["003_10afe1a0742d2c2f.txt"]
"""
LOGS = """\
logs.nan: {type: bool, description: The logged loss became NaN.}
logs.spike: {type: bool, description: The loss spiked.}
"""


@pytest.fixture
def kb(mini_root):
    rule = mini_root / "rules" / "nan-loss.yaml"
    text = rule.read_text().replace("summary: The training loss turns into NaN or Inf.\n",
                                    "summary: The training loss turns into NaN or Inf.\n"
                                    "observed_when: logs.nan == true\ncontradicted_when: logs.nan == false\n")
    text = text.replace("  nanloss.early: {type: bool, description: NaN within the first 100 steps.}",
                        "  nanloss.early: {type: bool, description: NaN within the first 100 steps., "
                        "defined_when: logs.nan == true}")
    rule.write_text(text)
    (mini_root / "rules" / "loss-spike.yaml").write_text(SPIKE)
    (mini_root / "rules" / "_facts" / "logs.yaml").write_text(LOGS)
    kb, problems = load_with_problems(mini_root)
    assert not problems, problems
    return kb


def user(**values):
    return {k.replace("__", "."): Fact(k.replace("__", "."), v, "user") for k, v in values.items()}


def probed(**values):
    obs = Observations()
    for k, v in values.items():
        obs.fact(k.replace("__", "."), v, "probe:logs")
    return obs


def cause(diag, cid):
    return next(c for c in diag.causes if c.id == cid)


# ---------------------------------------------------------------- statuses
def test_a_cause_at_its_prior_is_untested_never_ruled_out(kb, mini_root):
    rule = mini_root / "rules" / "nan-loss.yaml"
    rule.write_text(rule.read_text().replace("prior: 0.1", "prior: 0.01"))  # far below RULED_OUT
    kb, _ = load_with_problems(mini_root)
    diag = diagnose(kb, {"nan-loss": 1.0})
    assert {c.status for c in diag.causes} == {"untested"}
    score = cause(diag, "nan-loss.invalid-mask").score
    assert score == pytest.approx(0.01) and score < RULED_OUT


def test_a_factor_of_one_leaves_the_cause_untested(kb):
    # train.precision == "fp16" has lr 1.5 and no else_lr: bf16 applies a factor of 1
    diag = diagnose(kb, {"nan-loss": 1.0}, answers=user(train__precision="bf16"))
    assert cause(diag, "nan-loss.lr-too-high").status == "untested"
    assert cause(diag, "nan-loss.lr-too-high").explain() == "prior 0.20 → 0.20"
    diag = diagnose(kb, {"nan-loss": 1.0}, answers=user(train__precision="fp16"))
    assert cause(diag, "nan-loss.lr-too-high").status == "possible"


def test_ruled_out_needs_evidence_that_took_it_below_the_threshold(kb):
    diag = diagnose(kb, {"nan-loss": 1.0}, answers=user(data__mask__binary=True))
    mask = cause(diag, "nan-loss.invalid-mask")  # 0.1 × 0.05: evidence against, 0.0055
    assert mask.status == "ruled-out" and mask.score == pytest.approx(0.1 / 0.9 * 0.05 / (1 + 0.1 / 0.9 * 0.05))


def test_a_small_prior_pushed_lower_by_weak_evidence_is_not_ruled_out(kb, mini_root):
    rule = mini_root / "rules" / "nan-loss.yaml"
    rule.write_text(rule.read_text().replace("prior: 0.2", "prior: 0.04"))
    kb, _ = load_with_problems(mini_root)
    diag = diagnose(kb, {"nan-loss": 1.0}, answers=user(logs__nan=True, nanloss__early=False))
    lr = cause(diag, "nan-loss.lr-too-high")  # 0.04 × 0.5 = 0.02: below 0.05, but so was the prior
    assert lr.score < RULED_OUT and lr.status == "possible"


def test_evidence_for_and_against_rule_out_only_when_against_decides(kb, mini_root):
    rule = mini_root / "rules" / "nan-loss.yaml"
    rule.write_text(rule.read_text().replace("prior: 0.2", "prior: 0.04"))
    kb, _ = load_with_problems(mini_root)
    # 0.04 × 1.5 (fp16) = 0.059 ≥ 0.05, then × 0.5 (not early) = 0.03: the factor below 1 decided
    diag = diagnose(kb, {"nan-loss": 1.0}, answers=user(logs__nan=True, nanloss__early=False, train__precision="fp16"))
    assert cause(diag, "nan-loss.lr-too-high").status == "ruled-out"


def test_a_doubtful_symptom_never_rules_its_causes_out(kb, mini_root):
    # lr-peak: prior 0.45, × 0.2 when the NaN was not early -> posterior 0.14, not ruled out; its
    # symptom matched 0.024 below nan-loss, which the log shows (so 0.054 below: weight 0.07),
    # and it is shown at 0.01, under 0.05
    (mini_root / "rules" / "loss-spike.yaml").write_text(SPIKE.replace("lr: 2", "lr: 2\n        else_lr: 0.2"))
    kb, _ = load_with_problems(mini_root)
    diag = diagnose(kb, {"nan-loss": 0.8, "loss-spike": 0.776}, answers=user(logs__nan=True, nanloss__early=False))
    peak = cause(diag, "loss-spike.lr-peak")
    assert peak.weight == pytest.approx(math.exp(-(0.8 + OBSERVED_LEAD - 0.776) / MATCH_TEMPERATURE))
    assert peak.posterior == pytest.approx(0.14, abs=0.01)
    assert peak.score < RULED_OUT and peak.status == "possible"


def test_likely_and_confirmed(kb):
    diag = diagnose(kb, {"nan-loss": 1.0}, answers=user(logs__nan=True, nanloss__early=True, train__precision="fp16"))
    assert cause(diag, "nan-loss.lr-too-high").status == "likely"  # 0.2 × 4 × 1.5 → 0.6
    diag = diagnose(kb, {"nan-loss": 1.0}, answers=user(data__mask__binary=False))
    assert diag.causes[0].id == "nan-loss.invalid-mask" and diag.causes[0].status == "confirmed"



def test_two_causes_of_one_symptom_that_fit_alike_are_both_only_possible(kb, mini_root):
    """``likely`` needs a lead of LIKELY_LEAD over the symptom's other causes: lr-too-high at 0.6
    is likely while invalid-mask sits at 0.1, and only possible once invalid-mask reaches 0.6 too.
    A cause of another symptom at 0.62 (loss-spike.lr-peak, also seen) does not contest it."""
    seen = user(logs__nan=True, logs__spike=True, nanloss__early=True, train__precision="fp16")
    diag = diagnose(kb, {"nan-loss": 1.0, "loss-spike": 1.0}, answers=seen)
    assert cause(diag, "loss-spike.lr-peak").score > cause(diag, "nan-loss.lr-too-high").score
    assert cause(diag, "nan-loss.lr-too-high").status == "likely"
    rule = mini_root / "rules" / "nan-loss.yaml"  # invalid-mask: 0.1 x 13.5 on an early NaN -> 0.6
    rule.write_text(rule.read_text().replace(
        "      - when: data.mask.binary == false\n",
        "      - when: nanloss.early\n        lr: 13.5\n      - when: data.mask.binary == false\n"))
    kb, _ = load_with_problems(mini_root)
    diag = diagnose(kb, {"nan-loss": 1.0, "loss-spike": 1.0}, answers=seen)
    assert cause(diag, "nan-loss.invalid-mask").score == pytest.approx(0.6)
    assert cause(diag, "nan-loss.lr-too-high").score == pytest.approx(0.6)
    assert {cause(diag, c).status for c in ("nan-loss.invalid-mask", "nan-loss.lr-too-high")} == {"possible"}
    assert cause(diag, "loss-spike.lr-peak").status == "likely"

# ---------------------------------------------------------------- ranking
def test_causes_are_listed_in_the_order_of_the_score_shown(kb):
    for answers in ({}, user(data__mask__binary=True), user(logs__nan=True, nanloss__early=True),
                    user(train__precision="fp16", data__mask__binary=False)):
        diag = diagnose(kb, {"nan-loss": 0.8, "loss-spike": 0.78}, answers=answers)
        scores = [c.score for c in diag.causes]
        assert scores == sorted(scores, reverse=True)
        assert len({c.id for c in diag.causes}) == len(diag.causes), "a cause is listed once"


def test_a_weaker_second_symptoms_prior_cannot_outrank_the_best_symptoms_causes(kb):
    # loss-spike.lr-peak has prior 0.45, nan-loss's best cause 0.2; loss-spike matched 0.05 worse
    diag = diagnose(kb, {"nan-loss": 0.80, "loss-spike": 0.75})
    assert [c.symptom for c in diag.causes[:2]] == ["nan-loss", "nan-loss"]
    spike = cause(diag, "loss-spike.lr-peak")
    weight = math.exp(-0.05 / MATCH_TEMPERATURE)
    assert spike.weight == pytest.approx(weight) and spike.score == pytest.approx(0.45 * weight)
    assert spike.posterior == pytest.approx(0.45) and "(symptom weight)" in spike.explain()
    # two symptoms that matched about equally keep their own priors' order
    tied = diagnose(kb, {"nan-loss": 0.80, "loss-spike": 0.80})
    assert tied.causes[0].id == "loss-spike.lr-peak"


def test_symptoms_carry_match_and_implied_scores_as_separate_fields(kb):
    obs = Observations()
    obs.fact("data.mask.binary", False, "probe:batch")
    diag = diagnose(kb, {"loss-spike": 0.7}, obs)
    by_id = {s.id: s for s in diag.symptoms}
    assert by_id["loss-spike"].match == 0.7 and by_id["loss-spike"].implied is None
    assert by_id["nan-loss"].match is None and by_id["nan-loss"].implied == pytest.approx(0.1 / 0.9 * 30 / (1 + 0.1 / 0.9 * 30))
    assert by_id["nan-loss"].to_json()["implied"] == pytest.approx(0.7692, abs=1e-4)


def test_a_symptom_only_probes_imply_lists_only_the_causes_they_moved(kb):
    obs = Observations()
    obs.fact("data.mask.binary", False, "probe:batch")
    diag = diagnose(kb, {}, obs)
    assert [c.id for c in diag.causes] == ["nan-loss.invalid-mask"]  # not lr-too-high at its prior


# ---------------------------------------------------------------- symptoms on evidence
def test_a_symptom_is_listed_only_on_evidence(kb):
    assert diagnose(kb, {}, probed(logs__nan=False, logs__spike=False)).symptoms == []
    seen = diagnose(kb, {}, probed(logs__nan=True, logs__spike=False))
    assert [(s.id, s.observed, s.weight) for s in seen.symptoms] == [("nan-loss", True, 1.0)]
    assert {c.status for c in seen.causes} == {"untested"}


def test_a_contradicted_symptom_is_dropped_or_marked_not_observed(kb):
    obs = Observations()
    obs.fact("data.mask.binary", False, "probe:batch")  # implies nan-loss ...
    obs.fact("logs.nan", False, "probe:logs")           # ... but the log has no NaN
    assert diagnose(kb, {}, obs).symptoms == []
    named = diagnose(kb, {"nan-loss": 0.9}, obs)        # the user named it: listed, not observed
    assert [(s.id, s.observed, s.weight) for s in named.symptoms] == [("nan-loss", False, 0.0)]
    assert named.causes == [] and named.questions == []


def test_no_question_about_a_fact_without_a_value(kb):
    """'Did a NaN come within the first 100 steps?' is never asked when the log has no NaN, even
    by a symptom the log does show."""
    diag = diagnose(kb, {}, probed(logs__nan=False, logs__spike=True))
    assert [s.id for s in diag.symptoms] == ["loss-spike"]
    assert all(q.fact != "nanloss.early" for q in diag.questions)
    asked = []
    diagnose(kb, {"loss-spike": 1.0}, probed(logs__nan=False), asker=lambda q: asked.append(q.fact))
    assert "nanloss.early" not in asked
    diag = diagnose(kb, {"loss-spike": 1.0})  # nothing known about NaN: worth asking
    assert [q.fact for q in diag.questions] == ["nanloss.early"]


# ---------------------------------------------------------------- placeholders
def test_fix_steps_show_placeholders_and_the_fact_to_answer(kb):
    fix = cause(diagnose(kb, {"nan-loss": 1.0}), "nan-loss.lr-too-high").fixes[0]
    assert fix.steps == ["Divide the LR by 5: <LR> / 5", "init std sqrt(2/(5*<HIDDEN_SIZE>))"]
    assert fix.placeholders == {"model.hidden_size": "<HIDDEN_SIZE>", "train.lr": "<LR>"}
    assert fix.to_json()["needs"] == ["model.hidden_size", "train.lr"]


def test_on_real_ambiguous_reports_the_best_symptoms_cause_comes_first(shipped_kb):
    """Issue 13: a weaker second symptom's prior (nccl-timeout 0.25) outranked every cause of the
    symptom that matched best. On the paraphrase queries that match two or three symptoms within
    the ambiguity margin, the first cause now belongs to the symptom the query is about (16 of 16
    when measured; 8 of 16 with the old weight, match / best match)."""
    from test_matching import cases

    from troubleshoot.matcher import SymptomMatcher, pick

    matcher = SymptomMatcher(shipped_kb)
    hits = total = 0
    for query, expect in cases(shipped_kb):
        matches, ambiguous = pick(matcher.match(query))
        if not ambiguous:
            continue
        total += 1
        diag = diagnose(shipped_kb, {m.id: m.score for m in matches})
        hits += diag.causes[0].symptom == expect
    assert total >= 10 and hits >= 0.9 * total, f"{hits} of {total}"


def with_mask_twin(mini_root, prior: float, declared: bool = True):
    """The mini knowledge plus loss-spike.mask-values, confirmed by the condition that confirms
    nan-loss.invalid-mask, and declared its twin (``declared``) or not."""
    twin = "    same_fault: [nan-loss.invalid-mask]\n" if declared else ""
    (mini_root / "rules" / "loss-spike.yaml").write_text(SPIKE + f"""\
  - id: loss-spike.mask-values
    title: Mask values other than 0/1
    prior: {prior}
{twin}    evidence:
      - when: data.mask.binary == false
        lr: 30
        confirms: true
    fixes: [fix-binary-mask]
    sources: ["000_43af7a7a7fac43b8.txt"]
""")
    kb, problems = load_with_problems(mini_root)
    assert not problems, problems
    return kb


def test_one_fault_confirmed_under_two_symptoms_is_reported_once(kb, mini_root):
    kb = with_mask_twin(mini_root, 0.05)
    diag = diagnose(kb, {"nan-loss": 0.9, "loss-spike": 0.9}, answers=user(data__mask__binary=False))
    ids = [c.id for c in diag.causes]
    assert "nan-loss.invalid-mask" in ids and "loss-spike.mask-values" not in ids
    kept = cause(diag, "nan-loss.invalid-mask")  # 0.77 beats 0.61: the higher one stays
    assert kept.same_fault == ["loss-spike.mask-values"] and kept.to_json()["same_fault"] == ["loss-spike.mask-values"]


def test_a_shared_confirming_condition_alone_makes_no_twins(kb, mini_root):
    """"An older release works" confirms the framework regression of every symptom, yet the
    regression that NaNs is not the one that spikes: sharing a confirming condition makes two
    causes neither folded nor each other's ``same_fault``; only a declaration does."""
    kb = with_mask_twin(mini_root, 0.05, declared=False)
    assert "nan-loss.invalid-mask" not in twins(kb)
    diag = diagnose(kb, {"nan-loss": 0.9, "loss-spike": 0.9}, answers=user(data__mask__binary=False))
    shown = {c.id: c for c in diag.causes}
    assert {"nan-loss.invalid-mask", "loss-spike.mask-values"} <= set(shown)
    assert shown["nan-loss.invalid-mask"].same_fault == [] and shown["loss-spike.mask-values"].same_fault == []


@pytest.mark.parametrize("moved, status", [(False, "likely"), (True, "possible")])
def test_likely_leads_a_moved_rival_3x_and_an_untested_one_2x(mini_root, moved, status):
    """lr-too-high at 0.6 (0.2 x 4 x 1.5) against invalid-mask at 0.25: a 2.4x lead. Enough over
    a rival still at its prior (LIKELY_LEAD_PRIOR 2), not over one the same evidence moved (3)."""
    rule = mini_root / "rules" / "nan-loss.yaml"
    text = rule.read_text().replace("    prior: 0.1\n", "    prior: 0.25\n", 1)
    if moved:  # the fp16 answer nudges invalid-mask too (0.25 -> 0.26)
        said = "        says: A mask value other than 0/1 reaches the softmax.\n"
        text = text.replace(said, said + '      - when: train.precision == "fp16"\n        lr: 1.05\n')
    rule.write_text(text)
    kb, problems = load_with_problems(mini_root)
    assert not problems, problems
    diag = diagnose(kb, {"nan-loss": 1.0}, answers=user(nanloss__early=True, train__precision="fp16"))
    assert cause(diag, "nan-loss.lr-too-high").score == pytest.approx(0.6)
    assert cause(diag, "nan-loss.invalid-mask").status == ("possible" if moved else "untested")
    assert cause(diag, "nan-loss.lr-too-high").status == status


@pytest.mark.parametrize("shared, status", [(True, "possible"), (False, "likely")])
def test_causes_one_condition_confirms_alike_contest_likely_across_symptoms(kb, mini_root, shared, status):
    """The regression that NaNs and the one that spikes are confirmed by the same "the previous
    release works": evidence that lifts one lifts both, so the NaN one is not likely while the
    spike one scores higher (0.87 against 0.93), though causes of two symptoms do not contest."""
    rule = mini_root / "rules" / "nan-loss.yaml"
    said = "        says: A mask value other than 0/1 reaches the softmax.\n"
    rule.write_text(rule.read_text().replace(said, said + '      - when: train.precision == "fp16"\n        lr: 60\n'))
    confirm = "data.mask.binary == false" if shared else "nanloss.early"
    (mini_root / "rules" / "loss-spike.yaml").write_text(SPIKE + f"""\
  - id: loss-spike.regression
    title: A release regression
    prior: 0.3
    evidence:
      - when: {confirm}
        lr: 30
        confirms: true
      - when: train.precision == "fp16"
        lr: 30
    fixes: [fix-lower-lr]
    sources: ["https://github.com/liguodongiot/llm-action"]
""")
    kb, problems = load_with_problems(mini_root)
    assert not problems, problems
    diag = diagnose(kb, {"nan-loss": 0.9, "loss-spike": 0.9}, answers=user(train__precision="fp16"))
    assert cause(diag, "nan-loss.invalid-mask").score == pytest.approx(60 / 9 / (1 + 60 / 9))
    assert cause(diag, "nan-loss.invalid-mask").status == status
    assert cause(diag, "loss-spike.regression").score > cause(diag, "nan-loss.invalid-mask").score


def test_same_fault_names_the_declared_twins_also_off_the_table(kb, mini_root):
    """The NaN report alone leaves loss-spike off the table; its declared twin is still named (both
    ways: the declaration is on the loss-spike side), and an undeclared cause never is."""
    kb = with_mask_twin(mini_root, 0.05)
    diag = diagnose(kb, {"nan-loss": 0.9})
    assert cause(diag, "nan-loss.invalid-mask").to_json()["same_fault"] == ["loss-spike.mask-values"]
    assert all(c.same_fault == [] for c in diag.causes if c.id != "nan-loss.invalid-mask")


def test_twins_are_listed_under_the_best_fitting_symptom_at_the_better_twin_score(kb, mini_root):
    """Declared twins fold even while their confirming condition is unknown: the report is about
    NaN, so the NaN twin is listed, ranked at the score its better-supported twin reached."""
    kb = with_mask_twin(mini_root, 0.45)
    diag = diagnose(kb, {"nan-loss": 0.9, "loss-spike": 0.895})
    ids = [c.id for c in diag.causes]
    assert "loss-spike.mask-values" not in ids
    shown = cause(diag, "nan-loss.invalid-mask")
    twin_score = 0.45 * math.exp(-0.005 / MATCH_TEMPERATURE)
    assert shown.same_fault == ["loss-spike.mask-values"] and shown.scored_as == "loss-spike.mask-values"
    assert shown.score == pytest.approx(twin_score) and shown.posterior == pytest.approx(0.1)
    assert shown.to_json()["scored_as"] == "loss-spike.mask-values" and "as the same fault" in shown.explain()


def test_a_declared_twin_folds_like_a_confirmed_one(kb, mini_root):
    """No measurement confirms "the learning rate is too high", so no shared confirming condition
    can make the NaN and the spike causes one fault; `same_fault`, declared on one side, does (both
    ways), and the report lists it once."""
    (mini_root / "rules" / "loss-spike.yaml").write_text(SPIKE + """\
  - id: loss-spike.lr-too-high
    title: Learning rate too high
    prior: 0.3
    same_fault: [nan-loss.lr-too-high]
    evidence:
      - when: nanloss.early
        lr: 3
    fixes: [fix-binary-mask]
    sources: ["https://github.com/liguodongiot/llm-action"]
""")
    kb, problems = load_with_problems(mini_root)
    assert not problems, problems
    assert twins(kb)["nan-loss.lr-too-high"] == {"loss-spike.lr-too-high"}
    assert twins(kb)["loss-spike.lr-too-high"] == {"nan-loss.lr-too-high"}
    ids = [c.id for c in diagnose(kb, {"nan-loss": 0.9, "loss-spike": 0.9}).causes]
    assert ("nan-loss.lr-too-high" in ids) != ("loss-spike.lr-too-high" in ids)


def test_a_symptom_seen_to_happen_leads_one_the_words_only_suggest(kb):
    """The log shows the NaN; loss-spike matched the words as well as nan-loss did, so without the
    lead its 0.45 prior would come first. With it, loss-spike weighs exp(-1.5)."""
    diag = diagnose(kb, {"nan-loss": 0.8, "loss-spike": 0.8}, answers=user(logs__nan=True))
    weights = {s.id: s.weight for s in diag.symptoms}
    assert weights["nan-loss"] == 1.0
    assert weights["loss-spike"] == pytest.approx(math.exp(-OBSERVED_LEAD / MATCH_TEMPERATURE))
    assert diag.causes[0].symptom == "nan-loss"
    assert diagnose(kb, {"nan-loss": 0.8, "loss-spike": 0.8}).causes[0].id == "loss-spike.lr-peak"


def test_a_fact_common_to_many_symptoms_causes_puts_no_symptom_on_the_table(shipped_kb):
    """'Pinning the previous DeepSpeed fixes it' supports a framework regression under every
    symptom it can show as: it ranks the reported symptom's causes, and lists no other symptom
    (it once listed zero-loss, loss-plateau, repetition and five more for one crash report)."""
    obs = Observations()
    obs.fact("dist.version_change_fixes", True, "text")
    diag = diagnose(shipped_kb, {"system-failure": 0.55}, obs)
    assert [s.id for s in diag.symptoms] == ["system-failure"]
    assert diag.causes[0].id == "system-failure.framework-regression"
    alone = diagnose(shipped_kb, {}, obs)
    assert alone.symptoms == [] and alone.causes == []


def test_of_two_symptoms_both_seen_the_one_the_words_match_better_comes_first(shipped_kb):
    """'grad_norm: nan, loss: 0' shows a NaN and a zero loss; the words are about the zero loss
    (the id order once put nan-loss first)."""
    from troubleshoot.evidence import from_text
    from troubleshoot.matcher import SymptomMatcher

    text = "grad_norm:nan loss:0\n{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 2e-05, 'epoch': 0.1}"
    matched = {m.id: m.score for m in SymptomMatcher(shipped_kb).match_report(text)[:2]}
    diag = diagnose(shipped_kb, matched, from_text(shipped_kb, text))
    seen = [s for s in diag.symptoms if s.observed]
    assert {s.id for s in seen} >= {"nan-loss", "zero-loss"} and matched["zero-loss"] > matched["nan-loss"]
    assert diag.symptoms[0].id == "zero-loss"


# ---------------------------------------------------------------- shipped knowledge
@pytest.mark.parametrize("text", [
    "Fine-tuning with DeepSpeed fp16, after a few hundred steps it stops with: Current loss scale "
    "already at minimum - cannot decrease scale anymore. Exiting run.",
    "用 deepspeed 训练时报 Current loss scale already at minimum - cannot decrease scale anymore，然后训练就退出了",
])
def test_a_scale_at_its_minimum_names_the_symptom_not_the_cause(text):
    """Every persistent fp16 overflow ends with this message (a bf16 model in fp16, one layer's
    activations, a diverging run): it puts loss-scale-collapse first without proving it, so the
    cause is no more than possible until something says why the scale fell."""
    first = causes(text)[0]
    assert first["id"] == "fp16-overflow.loss-scale-collapse" and first["status"] == "possible"
