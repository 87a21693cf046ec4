"""A logged loss of exactly 0: the mark of a NaN hidden by the logger, or of nothing supervised.

A cross-entropy over a real vocabulary is never exactly 0, and rounding to four decimals gives 0.0
only below 5e-5. The Hugging Face Trainer drops NaN step losses from the logged average
(``logging_nan_inf_filter``), so a run that is NaN at every step logs ``'loss': 0.0`` next to
``'grad_norm': nan``; a batch with every label -100 logs 0 under a summed reduction. Works on the
common ``Record`` fields, so every log format is covered.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

MIN_ZERO_RECORDS = 3      # a single 0.0 can be a logging artefact; three are a pattern


@dataclass
class ZeroLossTracker:
    records: int = 0          # logged training steps with a loss
    zeros: int = 0            # ... whose loss is exactly 0
    zeros_grad_nan: int = 0   # ... and whose grad norm is NaN / Inf
    first_zero: int | None = None
    first_is_zero: bool = False

    def update(self, it: int, loss: float | None, grad_norm: float | None) -> None:
        """One logged training step, with the loss and grad norm exactly as logged."""
        if loss is None:
            return
        self.records += 1
        if loss != 0.0:
            return
        self.zeros += 1
        if self.records == 1:
            self.first_is_zero = True
        if self.first_zero is None:
            self.first_zero = it
        if grad_norm is not None and not math.isfinite(grad_norm):
            self.zeros_grad_nan += 1

    @property
    def pattern(self) -> bool:
        return self.zeros > 0 and self.zeros >= min(MIN_ZERO_RECORDS, self.records)

    def facts(self) -> dict[str, bool]:
        """rules/_facts/runtime.yaml logs.loss_zero*; empty when the log has no loss at all."""
        if not self.records:
            return {}
        return {"logs.loss_zero": self.pattern,
                "logs.loss_zero_grad_nan": self.pattern and self.zeros_grad_nan > 0,
                "logs.loss_zero_from_start": self.first_is_zero}

    def message(self) -> str | None:
        if not self.pattern:
            return None
        nan = (f"; the grad norm is NaN/Inf at {self.zeros_grad_nan} of them: a NaN loss that the logger shows as "
               "0.0 (HF Trainer logging_nan_inf_filter)") if self.zeros_grad_nan else \
              ": no supervised token (all labels -100), a broken kernel, or a loss reduced away"
        return (f"the loss is exactly 0.0 at {self.zeros} of {self.records} logged steps, first at iteration "
                f"{self.first_zero}{nan}")
