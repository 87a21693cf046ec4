"""Build a model from an HF checkpoint folder, and read what an HF-style config says about it.

The folder is loaded through the Auto classes from local files only (``local_files_only=True``,
``trust_remote_code=False``), so nothing is downloaded and no code from the folder runs:
AutoModelForCausalLM, else AutoModelForMaskedLM (BERT-style), else AutoModel. Weights are read by
transformers (safetensors, or weights-only torch pickles). The ``config_*`` readers are shared
with ``factory``, whose models may carry an HF-style ``config`` too.
"""
from __future__ import annotations

from pathlib import Path

from .caps import MAX_TENSORS, caps_skip, seeded
from .loaded import LoadedModel, accepts, one_line, param_dtype


def build_from_checkpoint(folder: Path, device, force: bool = False):
    """Load an HF folder from local files only; returns a LoadedModel or a skip tuple.

    The size is measured first on the meta device (no memory, no weights read), so a model above
    the caps is skipped before anything is loaded.
    """
    import torch

    skip = _tensors_skip(folder, force)  # before transformers is even imported
    if skip:
        return skip
    try:
        import transformers
        from transformers import AutoConfig
    except ModuleNotFoundError:
        return ("forward.skipped", "info", "gradient-flow and mask probes need transformers to "
                "build a checkpoint folder (pip install 'llmfix[models]'), or use --model-factory")
    with _Quiet(transformers):
        try:
            config = AutoConfig.from_pretrained(str(folder), local_files_only=True,
                                                trust_remote_code=False)
            auto = _auto_class(config)
            estimate = config_params_estimate(config)
            skip = estimate is not None and caps_skip(estimate, device, force)
            if skip:  # building even on the meta device takes minutes for 100k layers
                return skip
            with torch.device("meta"):
                n_params = sum(p.numel() for p in auto.from_config(config).parameters())
        except Exception as err:  # unknown model_type, custom code, broken config.json
            return ("forward.skipped", "warning", f"cannot build the model from {folder.name}: "
                    f"{one_line(err)}; give your model class with --model-factory")
        skip = caps_skip(n_params, device, force)
        if skip:
            return skip
        dtype = config_dtype(config)
        try:
            with seeded():  # any weight missing from the folder is initialised alike
                module, info = auto.from_pretrained(
                    str(folder), local_files_only=True, trust_remote_code=False, dtype=dtype,
                    output_loading_info=True)
        except Exception as err:
            return ("forward.skipped", "warning",
                    f"transformers could not load {folder.name}: {one_line(err)}")
    module.to(device).eval()
    notes = [f"{len(info.get(k) or ())} {k.replace('_', ' ')}" for k in ("missing_keys", "mismatched_keys")
             if info.get(k)]
    head = {"AutoModelForCausalLM": "causal-lm", "AutoModelForMaskedLM": "masked-lm"}.get(auto.__name__, "base")
    causal = head == "causal-lm" or (head == "base" and config_causal(config))
    return LoadedModel(
        module=module, where=str(folder), device=device, dtype=param_dtype(module),
        is_causal=causal, causal_declared=True, head=head, vocab_size=int(config.vocab_size),
        max_positions=config_max_positions(config), n_params=n_params, accepts=accepts(module),
        pad_token_id=config_pad_id(config), initializer_range=getattr(config, "initializer_range", None),
        kind=type(module).__name__, notes=notes)


def _tensors_skip(folder: Path, force: bool) -> tuple[str, str, str] | None:
    """The ``forward.skipped`` finding for a folder of more than MAX_TENSORS tensors: transformers
    keeps about 2 KB per checkpoint tensor while loading, so 100,000 tiny ones would cost hundreds
    of MB, and no model within the size caps has that many (Llama 70B: 723)."""
    from ...errors import ArtifactError
    from ...loaders.checkpoint import open_checkpoint, weight_shapes

    try:
        n = len(weight_shapes(open_checkpoint(folder)))
    except ArtifactError:
        return None
    if force or n <= MAX_TENSORS:
        return None
    return ("forward.skipped", "info", f"gradient-flow and mask probes skipped: {n:,} tensors in {folder.name}, "
            f"more than the {MAX_TENSORS:,} of any model within the caps; run them anyway with "
            "`llmfix probe ... --forward`")


def config_params_estimate(config) -> int | None:
    """12 * layers * hidden^2 + vocab * hidden from the config alone (None when a size is missing);
    ValueError naming the field when a size is not a positive integer."""
    sizes = {name: getattr(config, name, None) for name in ("num_hidden_layers", "hidden_size", "vocab_size")}
    for name, value in sizes.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise ValueError(f"config.json: {name} = {str(value)[:40]} is not a positive integer")
    layers, hidden, vocab = sizes.values()
    if layers is None or hidden is None:
        return None
    return 12 * layers * hidden * hidden + (vocab or 0) * hidden


def _auto_class(config):
    """CausalLM for decoders (``is_decoder``, *ForCausalLM / *LMHeadModel), MaskedLM for BERT."""
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM
    from transformers.models.auto import modeling_auto as ma

    causal = set(ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values())
    masked = set(ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES.values())
    archs = list(getattr(config, "architectures", None) or [])
    mtype = getattr(config, "model_type", "")
    if any(a in causal or a.endswith("ForCausalLM") for a in archs):
        return AutoModelForCausalLM
    if any(a in masked or a.endswith("ForMaskedLM") for a in archs):
        return AutoModelForMaskedLM
    if getattr(config, "is_decoder", False) and mtype in ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return AutoModelForCausalLM
    if mtype in ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return AutoModelForMaskedLM
    if mtype in ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return AutoModelForCausalLM
    return AutoModel


def config_causal(config) -> bool:
    """Decoder or encoder from an HF config: the architecture's class, ``is_decoder``, else any
    model type without a masked-LM head (the default assumption is causal)."""
    archs = list(getattr(config, "architectures", None) or [])
    if any(a.endswith("ForMaskedLM") for a in archs):
        return False
    if getattr(config, "is_decoder", False) or any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs):
        return True
    try:
        from transformers.models.auto import modeling_auto as ma
    except ModuleNotFoundError:
        return True
    mtype = getattr(config, "model_type", "")
    return mtype not in ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES


def config_dtype(config):
    """The dtype ``config.json`` declares (a torch.dtype or its name), fp32 when absent or not floating."""
    import torch

    value = getattr(config, "dtype", None)
    if isinstance(value, str):
        value = getattr(torch, value.replace("torch.", ""), None)
    return value if isinstance(value, torch.dtype) and value.is_floating_point else torch.float32


def config_max_positions(config) -> int | None:
    """The longest sequence the model takes, under whichever name its config family uses."""
    for name in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def config_pad_id(config) -> int:
    """``pad_token_id`` when it is a token of the vocabulary, else 0 (many configs leave it unset)."""
    value = getattr(config, "pad_token_id", None)
    vocab = getattr(config, "vocab_size", 0) or 0
    return value if isinstance(value, int) and 0 <= value < max(vocab, 1) else 0


class _Quiet:
    """Silence transformers' progress bars and warnings while loading (stdout stays JSON-clean)."""

    def __init__(self, transformers) -> None:
        self.logging = transformers.utils.logging

    def __enter__(self):
        self.level = self.logging.get_verbosity()
        self.bars = self.logging.is_progress_bar_enabled()
        self.logging.set_verbosity_error()
        self.logging.disable_progress_bar()
        return self

    def __exit__(self, *exc) -> None:
        self.logging.set_verbosity(self.level)
        if self.bars:
            self.logging.enable_progress_bar()
