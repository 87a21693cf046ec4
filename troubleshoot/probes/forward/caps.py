"""Where a model runs, how big it may be, and the seed that makes two runs alike.

The model-running probes must finish in well under a minute and never exhaust the machine, so a
model is measured before it is run and skipped, with a note saying how to run it anyway, when it
would not fit. The constants below are those limits (docs/probes-model.md, "Caps", explains each).

Where a value must follow a patched cap (the tests lower ``CPU_MAX_PARAMS`` and
``CPU_MAX_TOKENS``), other modules read it as ``caps.NAME`` at call time rather than
importing the value.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ...errors import LlmfixError

SEED = 0                        # torch.manual_seed for factories, missing weights, synthetic tokens
CPU_MAX_PARAMS = 400_000_000    # above this, forward+backward on CPU takes minutes: skip by default
MEMORY_FRACTION = 0.5           # the run may take this share of free RAM / free GPU memory
BYTES_PER_PARAM = 8             # weights + grads, fp32 at the widest (the fp32 pass)
ACTIVATION_HEADROOM = 1.25      # activations of a capped batch on top of weights + grads
MAX_BATCH, MAX_SEQ = 8, 256     # a user batch is cut to this many rows x tokens ...
CPU_MAX_TOKENS = 512            # ... and on CPU to this many tokens in all (fewer rows)
SYNTH_BATCH, SYNTH_SEQ = 2, 64  # synthetic batch when none is given
MAX_TENSORS = 20_000            # checkpoint tensors handed to transformers (~2 KB of its bookkeeping each)


def resolve_device(pref: str):
    """``auto`` = CUDA when torch sees a GPU, else CPU; ``cuda`` without a GPU is a usage error."""
    import torch

    if pref == "cuda" and not torch.cuda.is_available():
        raise LlmfixError("--device cuda: torch sees no CUDA device (use --device auto or cpu)")
    if pref not in ("auto", "cpu", "cuda"):
        raise LlmfixError(f"--device {pref}: expected auto, cpu or cuda")
    return torch.device("cuda" if pref != "cpu" and torch.cuda.is_available() else "cpu")


def caps_skip(n_params: int, device, force: bool) -> tuple[str, str, str] | None:
    """The ``forward.skipped`` finding for a model above the caps, or None to run it.

    ``force`` (``--forward``) runs it anyway, which is what the message tells the user to do.
    """
    ok, why = within_caps(n_params, device)
    if ok or force:
        return None
    return ("forward.skipped", "info",
            f"gradient-flow and mask probes skipped: {why}; run them anyway with "
            f"`llmfix probe ... --forward` (or on a GPU with --device cuda)")


def within_caps(n_params: int, device) -> tuple[bool, str]:
    """Decide run / skip from the parameter count and the free memory of the device."""
    need = int(n_params * BYTES_PER_PARAM * ACTIVATION_HEADROOM)
    if device.type == "cpu" and n_params > CPU_MAX_PARAMS:
        return False, f"{n_params / 1e6:.0f}M parameters, above the CPU cap of {CPU_MAX_PARAMS / 1e6:.0f}M"
    free = _free_memory(device)
    if free is not None and need > MEMORY_FRACTION * free:
        return False, (f"needs about {need / 2**30:.1f} GiB, more than {MEMORY_FRACTION:.0%} of the "
                       f"{free / 2**30:.1f} GiB free on {device.type}")
    return True, ""


def _free_memory(device) -> int | None:
    """Free GPU memory, or ``MemAvailable`` from /proc/meminfo; None where neither can be read."""
    import torch

    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


@contextmanager
def seeded() -> Iterator[None]:
    """Run a block with torch seeded to SEED, then restore the caller's RNG state.

    Building a model draws random numbers (a factory's init, weights missing from a folder);
    seeding makes two runs give the same numbers, and forking leaves the user's stream alone.
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        yield
