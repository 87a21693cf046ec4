"""The likelihood-ratio engine on a minimal knowledge tree: scores are recomputable by hand."""
import pytest

from troubleshoot.engine import State, diagnose, open_questions, score_cause
from troubleshoot.knowledge.read import load_with_problems
from troubleshoot.observations import Fact, Observations


@pytest.fixture
def kb(mini_root):
    kb, problems = load_with_problems(mini_root)
    assert not problems, problems
    return kb


def facts(**values):
    return {k.replace("__", "."): Fact(k.replace("__", "."), v, "user") for k, v in values.items()}


def test_prior_times_likelihood_ratio(kb):
    cause = kb.causes["nan-loss.invalid-mask"]
    score, lines, confirmed = score_cause(cause, facts(data__mask__binary=False))
    odds = 0.1 / 0.9 * 30
    assert score == pytest.approx(odds / (1 + odds)) and confirmed
    assert lines[0].fact == "data.mask.binary" and lines[0].factor == 30 and lines[0].holds
    score, lines, confirmed = score_cause(cause, facts(data__mask__binary=True))
    assert score == pytest.approx(0.1 / 0.9 * 0.05 / (1 + 0.1 / 0.9 * 0.05)) and not confirmed


def test_strong_evidence_against_defeats_a_proof(mini_root):
    """A `confirms` item does not confirm when another item reads strongly against the cause."""
    rules = mini_root / "rules" / "nan-loss.yaml"
    rules.write_text(rules.read_text().replace(
        "        says: A mask value other than 0/1 reaches the softmax.\n",
        "        says: A mask value other than 0/1 reaches the softmax.\n"
        "      - when: train.precision == \"fp16\"\n        lr: 0.2\n", 1))
    kb, problems = load_with_problems(mini_root)
    assert not problems, problems
    cause = kb.causes["nan-loss.invalid-mask"]
    assert score_cause(cause, facts(data__mask__binary=False, train__precision="bf16"))[2]
    score, _, confirmed = score_cause(cause, facts(data__mask__binary=False, train__precision="fp16"))
    assert not confirmed and score == pytest.approx(0.1 / 0.9 * 30 * 0.2 / (1 + 0.1 / 0.9 * 30 * 0.2))


def test_unknown_facts_leave_the_prior(kb):
    assert score_cause(kb.causes["nan-loss.lr-too-high"], {})[0] == pytest.approx(0.2)


def test_answers_change_ranking_and_status(kb):
    before = diagnose(kb, {"nan-loss": 1.0})
    assert before.causes[0].id == "nan-loss.lr-too-high"
    after = diagnose(kb, {"nan-loss": 1.0}, answers=facts(data__mask__binary=False))
    assert after.causes[0].id == "nan-loss.invalid-mask" and after.causes[0].status == "confirmed"
    assert after.problem_found
    ruled = diagnose(kb, {"nan-loss": 1.0}, answers=facts(data__mask__binary=True))
    assert next(c for c in ruled.causes if c.id == "nan-loss.invalid-mask").status == "ruled-out"


def test_question_order_most_informative_first_then_cheapest(kb):
    state = State(kb, {"nan-loss": 1.0})
    order = [q.fact for q in open_questions(state)]
    # mask: 0.1*|ln30-ln0.05| = 0.64; early: 0.2*|ln4-ln0.5| = 0.42; precision: 0.2*ln1.5 = 0.08
    assert order == ["data.mask.binary", "nanloss.early", "train.precision"]


def test_never_asks_what_is_known_and_stops_when_confirmed(kb):
    asked = []

    def asker(q):
        asked.append(q.fact)
        return {"data.mask.binary": True, "nanloss.early": True}.get(q.fact)

    diag = diagnose(kb, {"nan-loss": 1.0}, answers=facts(train__precision="fp16"), asker=asker)
    assert asked == ["data.mask.binary", "nanloss.early"]
    assert diag.causes[0].id == "nan-loss.lr-too-high"
    assert all(q.fact not in ("data.mask.binary", "train.precision") for q in diag.questions)

    asked.clear()
    diagnose(kb, {"nan-loss": 1.0}, asker=lambda q: asked.append(q.fact) or False)
    assert asked == ["data.mask.binary"]  # "no" confirms the invalid mask: nothing more to ask


def test_dont_know_is_not_asked_again(kb):
    asked = []
    diagnose(kb, {"nan-loss": 1.0}, asker=lambda q: asked.append(q.fact))
    assert len(asked) == len(set(asked)) == 3


def test_probe_facts_put_their_symptom_on_the_table(kb):
    obs = Observations()
    obs.fact("data.mask.binary", False, "probe:batch")
    diag = diagnose(kb, {}, obs)
    assert [s.id for s in diag.symptoms] == ["nan-loss"]
    assert diag.causes[0].evidence[0].source == "probe:batch"


def test_fix_steps_compute_numbers_when_facts_are_known(kb):
    diag = diagnose(kb, {"nan-loss": 1.0}, answers=facts(train__lr=3e-4, model__hidden_size=11600))
    fix = next(c for c in diag.causes if c.id == "nan-loss.lr-too-high").fixes[0]
    assert fix.steps == ["Divide the LR by 5: 6.0e-05", "init std 0.00587"] and fix.needs == []
    fix = next(c for c in diagnose(kb, {"nan-loss": 1.0}).causes if c.id == "nan-loss.lr-too-high").fixes[0]
    assert fix.needs == ["model.hidden_size", "train.lr"]


def test_parse_cache_sees_every_edit(mini_root):
    kb, _ = load_with_problems(mini_root)
    assert kb.causes["nan-loss.lr-too-high"].prior == 0.2
    kb, _ = load_with_problems(mini_root)  # from the cache
    assert kb.causes["nan-loss.lr-too-high"].prior == 0.2
    rule = mini_root / "rules" / "nan-loss.yaml"
    rule.write_text(rule.read_text().replace("prior: 0.2", "prior: 0.3"))
    kb, problems = load_with_problems(mini_root)
    assert kb.causes["nan-loss.lr-too-high"].prior == 0.3 and not problems
    rule.write_text(rule.read_text().replace("prior: 0.3", "prior: [broken"))
    assert load_with_problems(mini_root)[1], "a broken file is reported, never served from the cache"


def test_expensive_checks_wait_unless_they_separate_much_better(mini_root):
    rule = mini_root / "rules" / "nan-loss.yaml"
    rule.write_text(rule.read_text().replace("    ask: Are all attention_mask values 0 or 1?\n    cost: 1",
                                             "    ask: Are all attention_mask values 0 or 1?\n    cost: 5"))
    kb, problems = load_with_problems(mini_root)
    assert not problems
    # mask: 0.64 / sqrt(5) = 0.29 now comes after early: 0.42 / sqrt(2) = 0.30
    assert [q.fact for q in open_questions(State(kb, {"nan-loss": 1.0}))][:2] == ["nanloss.early", "data.mask.binary"]


def test_a_cause_its_own_evidence_names_is_not_weighed_down_by_its_symptom(shipped_kb):
    """The words matched MoE routing best and loss spikes 0.07 worse (weight 0.03); the report says
    the loss changed after resuming, which names the resume mismatch (ratio 13). That cause shows at
    its posterior, above MoE causes no evidence moved; its siblings keep the symptom's weight."""
    obs = Observations()
    obs.fact("lossspike.after_resume", True, "text", span="after resume", trust=0.8)
    diag = diagnose(shipped_kb, {"moe-routing": 0.44, "loss-spike": 0.37}, obs)
    first = diag.causes[0]
    assert first.id == "loss-spike.resume-mismatch"
    assert first.score == pytest.approx(first.posterior) and first.weight == 1.0
    sibling = next(c for c in diag.causes if c.id == "loss-spike.warmup-end")
    assert sibling.weight < 0.5 and sibling.score == pytest.approx(sibling.weight * sibling.posterior)


def test_a_run_setting_names_no_cause(shipped_kb):
    """"We train with FSDP" is the setup: the FSDP save cause stays weighed by its symptom."""
    obs = Observations()
    obs.fact("train.fsdp", True, "text", span="FSDP", trust=0.8)
    diag = diagnose(shipped_kb, {"loss-plateau": 0.43, "save-export": 0.37}, obs)
    fsdp = next(c for c in diag.causes if c.id == "save-export.fsdp-sharded-state-dict")
    assert fsdp.weight < 0.1 and diag.causes[0].symptom == "loss-plateau"


def test_a_bf16_release_with_no_precision_named_lifts_the_fp16_fault_a_little(shipped_kb):
    """The fp16-on-bf16 fault needs a bf16 release: a report naming a bf16 model (Falcon, Qwen) and no
    precision makes it somewhat likelier than one naming no model, a model released in fp16 much less."""
    cause = shipped_kb.causes["nan-loss.fp16-on-bf16-model"]
    released = {d: score_cause(cause, facts(model__pretrained_dtype=d))[0] for d in ("bf16", "fp16")}
    nothing = score_cause(cause, {})[0]
    assert released["fp16"] < nothing < released["bf16"] < 2 * nothing
    named_fp16 = score_cause(cause, facts(model__pretrained_dtype="bf16", train__precision="fp16"))[0]
    assert named_fp16 > released["bf16"]


def test_a_probe_finding_names_no_cause(shipped_kb):
    """The same fact measured by a probe: a fault the user did not report keeps its symptom's weight."""
    obs = Observations()
    obs.fact("lossspike.after_resume", True, "probe:logs")
    diag = diagnose(shipped_kb, {"moe-routing": 0.44, "loss-spike": 0.37}, obs)
    resume = next(c for c in diag.causes if c.id == "loss-spike.resume-mismatch")
    assert resume.weight < 1.0 and resume.score == pytest.approx(resume.weight * resume.posterior)
