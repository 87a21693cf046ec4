"""The live guard: catch a failing training step as it happens, keep the evidence, replay it,
diagnose it (docs/live-guard.md).

    from troubleshoot.live import LlmfixCallback      # Hugging Face Trainer (and TRL trainers)
    trainer = Trainer(..., callbacks=[LlmfixCallback()])

    from troubleshoot.live import Guard               # a plain PyTorch loop
    guard = Guard(model, optimizer, policy="skip")

Both are imported lazily: ``import troubleshoot.live`` loads neither torch nor transformers.
"""
from __future__ import annotations

__all__ = ["Guard", "LlmfixCallback"]


def __getattr__(name: str):
    if name == "Guard":
        from .guard import Guard

        return Guard
    if name == "LlmfixCallback":
        from .hf import LlmfixCallback

        return LlmfixCallback
    raise AttributeError(f"module 'troubleshoot.live' has no attribute {name!r}")
