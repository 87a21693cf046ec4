"""Findings for code in a training script that is known to break training (loaders/setup/script)."""
from __future__ import annotations

from pathlib import Path

from ...evidence.extract import Hit
from ...loaders.setup.script import patterns
from ...observations import Observations

SOURCE = "probe:setup"


def script_findings(path: Path, found: dict[str, Hit], obs: Observations) -> dict[str, Hit]:
    """Findings for each pattern; returns the facts they establish (beside the settings in ``found``)."""
    facts: dict[str, Hit] = {}
    fp16 = any(h.value == "fp16" for name, h in found.items() if name in ("train.precision", "model.dtype"))
    for p in sorted(patterns(path), key=lambda p: p.id != "half"):  # fp16 known before the mask fills
        where = f"{path}:{p.line}"

        def fact(name: str, value, trust: float = 1.0, p=p) -> None:
            facts[name] = Hit(name, value, p.quote, p.line, p.line, trust, "key")

        if p.id == "half":
            obs.find("setup.model_half", "warning", "the model is cast to fp16 and trained in it: fp16 weights have "
                     "no fp32 master copy (small updates are lost, GradScaler refuses to unscale); load in fp32 or "
                     f"bf16 and let AMP cast: {p.quote}", where)
            fact("model.dtype", "fp16")
            fact("fp16overflow.params_loaded_fp16", True)
            fp16 = True
        elif p.id == "pad_is_eos":
            obs.find("setup.pad_is_eos", "info", f"the pad token is the EOS token; a collator that masks padding "
                     f"then masks every EOS too, and the model never learns to stop: {p.quote}", where)
            fact("model.pad_is_eos", True)
        elif p.id == "collator_masks_pad":
            fact("data.collator_masks_pad", True)
        elif p.id == "eos_appended":
            fact("data.eos.appended", True)
        elif p.id == "labels_unmasked":
            obs.find("setup.labels_unmasked", "warning", "labels are a copy of input_ids and nothing in the script "
                     f"sets -100 (padding and prompt tokens are trained on): {p.quote}", where)
            fact("data.labels.pad_not_ignored", True, trust=0.6)
        elif p.id == "mask_fill":
            risky = "warning" if fp16 else "info"
            obs.find("setup.mask_fill", risky, "a mask is filled with -1e9, finfo(float32).min or -inf: beyond the "
                     "fp16 range (65504) it overflows, and -inf makes a fully masked row NaN"
                     + (" (the run is fp16)" if fp16 else " (fine in fp32 / bf16 unless rows are fully masked)")
                     + f": {p.quote}",
                     where)
            if fp16:
                fact("fp16overflow.mask_fill_large", True)
                fact("mask.additive_fill_unsafe", True)
        elif p.id == "peft_state_dict_override":
            obs.find("setup.peft_state_dict_override", "warning", "model.state_dict is replaced by a function "
                     "returning get_peft_model_state_dict(...); PEFT's save_pretrained filters that result again "
                     f"and, from PEFT 0.3 on, writes an almost empty adapter (about 443 bytes): {p.quote}", where)
            fact("export.peft_state_dict_override", True)
        elif p.id == "reward_distance":
            obs.find("setup.reward_distance", "warning", "a reward function returns an unsigned distance "
                     "(abs(a - b)); GRPO / PPO / RLOO maximise the reward, so the policy learns to move away "
                     f"from the target (negate it, or use 1 / (1 + distance)): {p.quote}", where)
            fact("pref.reward_direction_inverted", True)
    return facts
