"""Evidence items of the shipped knowledge that any of several facts can satisfy: what a probe
measures counts as much as what the user names (a config with routed experts is an MoE model; a
colocated vLLM engine is a rollout engine)."""
import pytest

from troubleshoot.engine import diagnose
from troubleshoot.knowledge import load
from troubleshoot.observations import Observations


@pytest.fixture(scope="module")
def kb():
    return load()


def factor(kb, symptom: str, cause: str, says: str, facts: dict) -> float:
    """The factor the item of ``cause`` whose explanation starts with ``says`` applied, given ``facts``."""
    obs = Observations()
    for name, value in facts.items():
        obs.fact(name, value, "probe:config")
    ranked = {c.id: c for c in diagnose(kb, {symptom: 1.0}, obs, {}, None).causes}
    lines = [e for e in ranked[cause].evidence if e.says.startswith(says)]
    return lines[0].factor if lines else 1.0


@pytest.mark.parametrize("facts, expected", [({"model.moe.num_experts": 8}, 2.5),
                                             ({"export.moe_model": True}, 2.5),
                                             ({"model.moe.num_experts": 1}, 1.0)])
def test_routed_experts_in_the_config_make_an_moe_export(kb, facts, expected):
    assert factor(kb, "save-export", "save-export.moe-expert-weights-mishandled",
                  "The model is a mixture-of-experts model", facts) == expected


@pytest.mark.parametrize("engine", ["train.rollout_engine", "system.rollout_engine_colocated"])
def test_a_colocated_engine_is_a_rollout_engine_for_lora_weight_sync(kb, engine):
    facts = {"train.finetune_method": "lora", engine: True}
    assert factor(kb, "preference-divergence", "preference-divergence.rollout-weights-stale",
                  "A LoRA adapter trained with vLLM", facts) == 4
