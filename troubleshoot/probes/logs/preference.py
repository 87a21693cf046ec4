"""Preference and RL metrics of TRL-style logs: both rewards falling, KL negative or exploding,
margins running away, the loss collapsing to 0 or stuck at ln 2.

DPO / IPO / KTO / ORPO trainers log ``rewards/chosen``, ``rewards/rejected``, ``rewards/margins``,
``rewards/accuracies`` and ``logps/*``; PPO, RLOO and GRPO log ``kl`` / ``objective/kl``, a clip
fraction and the completion length. ``PrefTracker`` keeps each of them as a ``Series`` of at most
``2 * Series.CAP`` points (neighbours are averaged when it fills, so memory is fixed whatever the
log length); ``judge`` compares the start and the end of each series. Thresholds are in the units
the trainers log (rewards are beta-scaled log-ratios, logps summed log-probabilities, KL in nats)
and are documented in docs/log-analysis.md ("Preference runs and a loss of exactly 0").

Sample, on a DPO run whose learning rate was copied from SFT::

    warning  trainer_state.json  logs.pref.rewards_falling  rewards/chosen fell from 0.01 to -7.9 and
             rewards/rejected from -0.02 to -31: both answers lose probability (likelihood displacement)
    warning  trainer_state.json  logs.pref.loss_collapsed   the preference loss fell to 0.0003 ...
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

LN2 = math.log(2)
MIN_POINTS = 5           # fewer logged values than this: no verdict on a series
EDGE_FRACTION = 0.1      # start / end of a series = mean of its first / last 10 % of points
REWARD_DROP = 0.5        # rewards/chosen and /rejected both down by this much (reward units)
LOGPS_DROP_NATS, LOGPS_DROP_REL = 5.0, 0.05  # logps/chosen down by 5 nats and 5 % of its level
MARGIN_RUNAWAY = 10.0    # margins of this many reward units that still grow
STILL_RISING = 1.1       # end above the middle third by 10 %: not levelled off
COLLAPSED_LOSS = 0.01    # a DPO-style loss below this over the last quarter has collapsed
STUCK_TOLERANCE = 0.02   # |loss - ln 2| over the last half: the policy never separates the pair
INITIAL_REWARD = 1.0     # |reward| at the first logged step: policy and reference already differ
EARLY_STEP_FRACTION = 0.1  # "the first logged step" means within the first 10 % of the run
KL_NEGATIVE = -0.05      # nats; a KL estimate below this is clearly negative
KL_NEGATIVE_SHARE = 0.1  # ... on at least 10 % of the logged steps (and 3 of them)
KL_EXPLODE_FACTOR, KL_EXPLODE_MIN = 10.0, 10.0  # end >= 10x the early median and >= 10 nats
CLIPFRAC_HIGH = 0.2      # mean clip fraction over the last half
LENGTH_GROWTH = 1.5      # completions 1.5x longer at the end than at the start

PAIRWISE = ("chosen", "rejected", "margins", "accuracies", "logps_chosen")


@dataclass
class Series:
    """One metric over the run in at most ``2 * CAP`` points; the first value is kept as logged."""

    CAP = 256
    its: list[int] = field(default_factory=list)
    vals: list[float] = field(default_factory=list)
    first: tuple[int, float] | None = None
    count: int = 0
    stride: int = 1
    _n: int = 0
    _sum: float = 0.0

    def add(self, it: int, value: float) -> None:
        if not math.isfinite(value):
            return
        if self.first is None:
            self.first = (it, value)
        self.count += 1
        self._n += 1
        self._sum += value
        if self._n == self.stride:
            self.its.append(it)
            self.vals.append(self._sum / self._n)
            self._n, self._sum = 0, 0.0
            if len(self.vals) >= 2 * self.CAP:  # average neighbours: half the points, double the stride
                self.vals = [(a + b) / 2 for a, b in zip(self.vals[::2], self.vals[1::2])]
                self.its = self.its[1::2]
                self.stride *= 2

    def points(self) -> list[float]:
        return self.vals + ([self._sum / self._n] if self._n else [])

    def edges(self) -> tuple[float, float] | None:
        """(mean of the first, mean of the last EDGE_FRACTION of the points); None when too short."""
        p = self.points()
        if len(p) < MIN_POINTS:
            return None
        k = max(1, int(len(p) * EDGE_FRACTION))
        return sum(p[:k]) / k, sum(p[-k:]) / k

    def tail(self, fraction: float) -> list[float]:
        p = self.points()
        return p[-max(1, int(len(p) * fraction)):]

    def middle_third(self) -> float:
        p = self.points()
        mid = p[len(p) // 3: max(len(p) // 3 + 1, 2 * len(p) // 3)]
        return sum(mid) / len(mid)


@dataclass
class PrefTracker:
    """Feed one logged step at a time (``update``); O(1) memory per metric."""

    series: dict[str, Series] = field(default_factory=dict)
    loss: Series = field(default_factory=Series)
    kl_negative: int = 0
    last_it: int = 0

    def update(self, it: int, metrics: dict[str, float], loss: float | None) -> None:
        if not metrics:
            return
        self.last_it = max(self.last_it, it)
        for name, value in metrics.items():
            self.series.setdefault(name, Series()).add(it, value)
            if name == "kl" and value < KL_NEGATIVE:
                self.kl_negative += 1
        if loss is not None:
            self.loss.add(it, loss)

    @property
    def seen(self) -> bool:
        return bool(self.series)

    @property
    def pairwise(self) -> bool:
        """A DPO-style run (chosen / rejected rewards logged), where the loss has a known scale."""
        return any(n in self.series for n in PAIRWISE)


@dataclass
class Verdict:
    """What one series says: a fact (name, value) and, when it is a problem, a finding."""

    fact: str
    value: bool | float
    finding: tuple[str, str, str] | None = None  # (id, severity, message)


def _g(x: float) -> str:
    return f"{x:.3g}"


def _flag(holds: bool, finding: tuple[str, str, str]) -> Verdict:
    """A verdict whose fact and finding (id, severity, message) share one id; the finding only when it holds."""
    return Verdict(finding[0], holds, finding if holds else None)


def judge(t: PrefTracker) -> list[Verdict]:
    """Every verdict the logged preference metrics support; nothing is guessed for absent metrics."""
    out: list[Verdict] = []
    for check in (_rewards, _logps, _margins, _loss, _initial, _accuracy, _kl, _clipfrac, _length):
        out.extend(check(t))
    return out


def _rewards(t: PrefTracker) -> list[Verdict]:
    c, r = t.series.get("chosen"), t.series.get("rejected")
    ce, re_ = (c.edges() if c else None), (r.edges() if r else None)
    if not (ce and re_):
        return []
    falling = ce[1] < ce[0] - REWARD_DROP and ce[1] < -REWARD_DROP and re_[1] < re_[0] - REWARD_DROP
    msg = (f"rewards/chosen fell from {_g(ce[0])} to {_g(ce[1])} and rewards/rejected from {_g(re_[0])} to "
           f"{_g(re_[1])}: the policy makes both answers less likely than the reference does (likelihood "
           "displacement); the margin can still grow while the model drifts")
    return [Verdict("logs.pref.rewards_both_falling", falling,
                    ("logs.pref.rewards_falling", "warning", msg) if falling else None)]


def _logps(t: PrefTracker) -> list[Verdict]:
    s = t.series.get("logps_chosen")
    e = s.edges() if s else None
    if not e:
        return []
    falling = e[1] < e[0] - max(LOGPS_DROP_NATS, LOGPS_DROP_REL * abs(e[0]))
    msg = f"logps/chosen fell from {_g(e[0])} to {_g(e[1])}: the preferred answers lose probability under the policy"
    return [_flag(falling, ("logs.pref.chosen_logps_falling", "info", msg))]


def _margins(t: PrefTracker) -> list[Verdict]:
    s = t.series.get("margins")
    e = s.edges() if s else None
    if not e:
        return []
    acc = t.series.get("accuracies")
    acc_end = acc.edges()[1] if acc and acc.edges() else None
    runaway = e[1] >= MARGIN_RUNAWAY and e[1] > STILL_RISING * s.middle_third() and (acc_end is None or acc_end >= 0.97)
    msg = (f"rewards/margins grew from {_g(e[0])} to {_g(e[1])} and still rises"
           + (f", with rewards/accuracies at {acc_end:.2f}" if acc_end is not None else "")
           + ": the policy keeps moving away from the reference (learning rate or beta)")
    return [_flag(runaway, ("logs.pref.margin_runaway", "warning", msg))]


def _loss(t: PrefTracker) -> list[Verdict]:
    if not t.pairwise or len(t.loss.points()) < MIN_POINTS:
        return []
    quarter, half = t.loss.tail(0.25), t.loss.tail(0.5)
    collapsed = max(quarter) < COLLAPSED_LOSS
    stuck = all(abs(v - LN2) < STUCK_TOLERANCE for v in half)
    return [_flag(collapsed, ("logs.pref.loss_collapsed", "warning",
                  f"the preference loss fell to {_g(quarter[-1])} and stayed below 0.01 for the last quarter of the "
                  "run: the pairs are separated perfectly, the usual sign of a learning rate or beta that lets the "
                  "policy run away")),
            _flag(stuck, ("logs.pref.loss_stuck", "warning",
                  f"the preference loss stays at {_g(half[-1])} (ln 2 = 0.693) for the second half of the run: the "
                  "policy does not separate chosen from rejected"))]


def _initial(t: PrefTracker) -> list[Verdict]:
    firsts = {n: t.series[n].first for n in ("chosen", "rejected", "margins") if n in t.series}
    if not firsts or not t.last_it:
        return []
    step = min(f[0] for f in firsts.values())
    if step > EARLY_STEP_FRACTION * t.last_it:
        return []  # the log does not start near step 0
    far = {n: v for n, (_, v) in firsts.items() if abs(v) > INITIAL_REWARD}
    msg = ("at the first logged step (" + str(step) + ") " + ", ".join(f"rewards/{n} = {_g(v)}" for n, v in far.items())
           + ": policy and reference differ before training moved them (another reference checkpoint, "
           "dtype, unmerged adapter or precomputed log-probs)")
    return [Verdict("logs.pref.initial_rewards_nonzero", bool(far),
                    ("logs.pref.initial_rewards", "warning", msg) if far else None)]


def _accuracy(t: PrefTracker) -> list[Verdict]:
    s = t.series.get("accuracies")
    e = s.edges() if s else None
    return [Verdict("logs.pref.accuracy_final", round(e[1], 3))] if e else []


def _kl(t: PrefTracker) -> list[Verdict]:
    s = t.series.get("kl")
    if not s or s.count < MIN_POINTS:
        return []
    negative = t.kl_negative >= max(3, KL_NEGATIVE_SHARE * s.count)
    p = s.points()
    early = sorted(p[: max(1, len(p) // 5)])
    early_median = early[len(early) // 2]
    end = s.edges()[1]
    exploding = end >= max(KL_EXPLODE_MIN, KL_EXPLODE_FACTOR * max(early_median, 0.0))
    return [_flag(negative, ("logs.pref.kl_negative", "error",
                  f"the KL estimate is below {KL_NEGATIVE} at {t.kl_negative} of {s.count} logged steps: completions "
                  "are not sampled from the distribution the log-probs describe (top-k / top-p / min_length, "
                  "temperature, another inference engine)")),
            _flag(exploding, ("logs.pref.kl_exploding", "warning",
                  f"the KL to the reference grew from {_g(early_median)} to {_g(end)}: the policy moves far from the "
                  "reference (beta, learning rate, reward hacking)"))]


def _clipfrac(t: PrefTracker) -> list[Verdict]:
    s = t.series.get("clipfrac")
    if not s or s.count < MIN_POINTS:
        return []
    half = s.tail(0.5)
    level = sum(half) / len(half)
    high = level > CLIPFRAC_HIGH
    return [_flag(high, ("logs.pref.clipfrac_high", "warning", f"the clip fraction averages {level:.2f} over the "
                  "second half: many tokens leave the trust region each update"))]


def _length(t: PrefTracker) -> list[Verdict]:
    s = t.series.get("length")
    e = s.edges() if s else None
    if not e or e[0] <= 0:
        return []
    growing = e[1] >= LENGTH_GROWTH * e[0] and e[1] > s.middle_third()
    return [_flag(growing, ("logs.pref.length_growing", "info", f"mean completion length grew from {_g(e[0])} to "
                  f"{_g(e[1])} tokens and is still rising: check the samples for length exploitation"))]
