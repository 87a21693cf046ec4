"""Facts that follow from several settings together: the kind of parallelism, the framework,
fp16 weights trained under fp16 AMP, the precision of a run that sets none besides the dtype it
loads the model in, and a trainer's default for a setting its config leaves out."""
from __future__ import annotations

from ...evidence.extract import Hit
from ...observations import Artifact, Observations

CONFIG_FRAMEWORKS = {"deepspeed config": "deepspeed", "LLaMA-Factory config": "hf-trainer",
                     "axolotl config": "hf-trainer",
                     "training arguments": "hf-trainer", "NeMo / Megatron-Core config": "megatron",
                     "torchtune config": "pytorch", "OLMo config": "pytorch", "mlx-lm LoRA config": "other"}

# Megatron-Core parallel sizes: in a LLaMA-Factory YAML they select its mcore_adapter backend
MEGATRON_PARALLEL = {"tensor_model_parallel_size", "pipeline_model_parallel_size", "expert_model_parallel_size"}


def derive(obs: Observations, source: str) -> None:
    values = {name: fact.value for name, fact in obs.facts.items()}
    kind = next((kind for fact, kind in (("tp.size", "tensor"), ("train.pp_size", "pipeline"))
                 if (values.get(fact) or 0) > 1), None)
    if kind is None and (values.get("train.zero_stage") or 0) >= 1:
        kind = "zero"
    if kind and "train.parallelism" not in values:
        obs.fact("train.parallelism", kind, source, "from the parallel sizes set")
    if values.get("model.dtype") == "fp16" and values.get("train.precision") == "fp16" \
            and "fp16overflow.params_loaded_fp16" not in values:
        obs.fact("fp16overflow.params_loaded_fp16", True, source, "model loaded in fp16 and trained with fp16 AMP")
    loaded = obs.facts.get("model.dtype")
    if loaded is not None and "train.precision" not in values:  # no AMP setting: it computes in that dtype
        obs.fact("train.precision", loaded.value, source, f"the model is loaded in {loaded.value} and no "
                 f"mixed-precision setting is given: {loaded.span}", span=loaded.span, trust=loaded.trust)


def framework_of(artifact: Artifact, rows: list) -> str | None:
    """The training framework a config or command belongs to, when it says."""
    if artifact.kind == "trainer-config":
        if artifact.detail == "LLaMA-Factory config" and {r.path for r in rows} & MEGATRON_PARALLEL:
            return "megatron"  # its Megatron-Core backend (mcore_adapter, hiyouga/LLaMA-Factory#9237) trains
        return CONFIG_FRAMEWORKS.get(artifact.detail)
    paths = {r.path for r in rows}
    if paths & {"tensor_model_parallel_size", "num_layers", "micro_batch_size"} and \
            paths & {"seq_length", "global_batch_size", "train_iters"}:
        return "megatron"
    hf_classes = ("trainingarguments.", "sftconfig.", "dpoconfig.", "seq2seqtrainingarguments.")
    if any(p.startswith(hf_classes) for p in paths):
        return "hf-trainer"
    if "deepspeed" in paths or "deepspeed_config" in paths:
        return "deepspeed"
    return None


def defaults(artifact: Artifact, found: dict[str, Hit]) -> dict[str, Hit]:
    """Settings a trainer fills in when its config leaves them out, where the default decides a
    risk: DeepSpeed's ZeroConfig gathers no 16-bit weights on save unless told to
    (``gather_16bit_weights_on_model_save``, default False), so a ZeRO-3 JSON without the key
    saves no model through the HF Trainer."""
    stage = found.get("train.zero_stage")
    if artifact.detail != "deepspeed config" or stage is None or stage.value != 3 \
            or "export.zero3_gathers_on_save" in found:
        return {}
    return {"export.zero3_gathers_on_save": Hit("export.zero3_gathers_on_save", False,
                                                "stage3_gather_16bit_weights_on_model_save not set (DeepSpeed's "
                                                "default: false)", stage.start, stage.end, 1.0, "key")}


def warmup_fraction(found: dict[str, Hit]) -> None:
    """A warmup length in (0, 1) is a fraction of the run, not a step count: Transformers v5
    reads ``warmup_steps: 0.1`` as ``warmup_ratio`` (huggingface/transformers#41326, which
    deprecates warmup_ratio) and trainers built on it (axolotl, TRL) pass the value through, so
    0.1 means a warmup over 10% of the steps, never a warmup of 0.1 step."""
    hit = found.get("train.warmup_iterations")
    if hit is None or not 0 < hit.value < 1:
        return
    del found["train.warmup_iterations"]
    found.setdefault("train.warmup_ratio", hit._replace(fact="train.warmup_ratio"))
