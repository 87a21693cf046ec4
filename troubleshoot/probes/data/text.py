"""Text-level checks for text records (.jsonl ``text`` / ``messages`` / ``prompt``+``completion``).

Why: a model learns whatever the pipeline leaves in the text. OPT's team found their dedup step
had added escape characters and the falling loss was the model learning to predict them
(seed 001). So before training, measure per sample:

- literal escape sequences — ``\\n``, ``\\t``, ``\\"``, ``\\u00e9`` as characters (JSON encoded
  twice). A sample counts when it has more literal escapes than real newlines (code with a few
  ``"\\n"`` strings has many real newlines) and LaTeX commands (``\\nabla``, ``\\theta``) are not
  escapes;
- HTML entities (``&amp;``, ``&#39;``) and mojibake (``Ã©``, ``â€™``: UTF-8 read as Latin-1);
- exact duplicates (NFKC, case- and whitespace-folded text, hashed), empty / very short samples,
  and samples whose supervised part (completion, assistant turns) is empty;
- periodic repeats, OLMo's filter on whitespace words: period <= 13 repeated >= 32 times.

With a checkpoint folder beside the file, the first ``MAX_TOKENIZE`` samples are tokenised with its
tokenizer (``AutoTokenizer``, local files only) and checked like a token batch: ids within the
embedding, EOS present, BOS doubled.

Sample findings::

    data.jsonl: line 3  data.text.escape_rate  412 of 1000 samples (41.2%) hold literal escape
        sequences, e.g. line 3: 'Hello\\nworld' ... pervasive (> 20%): fix the pipeline, not the model
    data.jsonl: line 9  data.text.duplicate_rate  87 of 1000 samples (8.7%) duplicate an earlier
        one, e.g. line 9 repeats line 2
"""
from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from pathlib import Path

from ...loaders.batch import Batch
from ...loaders.tokenizer import Specials, load_tokenizer
from ...observations import Observations
from .labels import DEFAULTS as TOKEN_DEFAULTS, double_bos, eos_checks, periodic_runs, publish, range_check

# Thresholds (heuristic, see docs/probes-data.md): warn above the first, error above "pervasive".
ESCAPE_WARN, ESCAPE_ERROR = 0.01, 0.20
ENTITY_WARN = MOJIBAKE_WARN = 0.01
DUPLICATE_WARN = 0.05
SHORT_CHARS, SHORT_WARN = 16, 0.05
MAX_TOKENIZE = 256                 # samples tokenised for the token-level checks
MAX_REPEAT_WORDS = 4_000_000       # words fed to the periodic-repeat check

ESCAPE_RE = re.compile(r'\\(u[0-9a-fA-F]{4}|["/]|[ntr][a-zA-Z]*)')
LATEX = {"nabla", "neq", "ne", "newline", "nu", "not", "noindent", "ni", "nleq", "ngeq", "nmid", "newcommand",
         "theta", "times", "tau", "text", "textbf", "textit", "texttt", "tan", "tanh", "to", "top", "tilde",
         "triangle", "tfrac", "textrm", "right", "rho", "rangle", "rightarrow", "rm", "rfloor", "rceil",
         "rvert", "rbrace", "renewcommand", "ref", "rVert", "tt", "textsc", "tag", "therefore"}
ENTITY_RE = re.compile(r"&(?:amp|lt|gt|quot|apos|nbsp|#\d{2,6}|#x[0-9a-fA-F]{2,5});")
MOJIBAKE_RE = re.compile("[\u00c2\u00c3][\u0080-\u00bf\u0152\u0153\u0160\u0161\u0178\u017d\u017e\u0192"
                         "\u02c6\u02dc\u2013\u2014\u2018-\u201e\u2020-\u2022\u2026\u2030\u2039\u203a"
                         "\u20ac\u2122]|\u00e2\u20ac")


def check(b: Batch, spec: Specials, obs: Observations, folder: Path | None) -> None:
    """All text checks on ``b.texts``; tokenised checks when ``folder`` has a tokenizer."""
    texts = b.texts
    n = len(texts)
    escaped = [t for t in texts if _escapes(t.text)]
    _rate(obs, b, "data.text.escape_rate", escaped, n, ESCAPE_WARN, ESCAPE_ERROR,
          "hold literal escape sequences (\\n, \\t, \\\" or \\uXXXX as characters: text JSON-encoded twice "
          "or escaped by a pipeline step); the model learns to emit them", pattern=ESCAPE_RE)
    entities = [t for t in texts if "&" in t.text and ENTITY_RE.search(t.text)]
    _rate(obs, b, "data.text.entity_rate", entities, n, ENTITY_WARN, None,
          "hold HTML entities (&amp;, &#39;, ...) left by scraping or escaping", pattern=ENTITY_RE)
    mojibake = [t for t in texts if _maybe_mojibake(t.text) and MOJIBAKE_RE.search(t.text)]
    _rate(obs, b, "data.text.mojibake_rate", mojibake, n, MOJIBAKE_WARN, None,
          "hold mojibake (UTF-8 decoded as Latin-1 / cp1252, e.g. 'Ã©' for 'é')", pattern=MOJIBAKE_RE)
    seen: dict[bytes, int] = {}
    dups: list = []
    first_of: dict[int, int] = {}
    for t in texts:
        key = hashlib.blake2b(_normalise(t.text).encode("utf-8", "replace"), digest_size=16).digest()
        if key in seen:
            dups.append(t)
            first_of[t.line] = seen[key]
        else:
            seen[key] = t.line
    _rate(obs, b, "data.text.duplicate_rate", dups, n, DUPLICATE_WARN, None,
          "exactly duplicate an earlier sample (after folding case and whitespace): repeated data is "
          "memorised and inflates how often the model sees it",
          suffix=f" repeats line {first_of[dups[0].line]}" if dups else "")
    short = [t for t in texts if len(t.text.strip()) < SHORT_CHARS]
    empty = sum(1 for t in short if not t.text.strip())
    _rate(obs, b, "data.text.short_rate", short, n, SHORT_WARN, None,
          f"are empty or shorter than {SHORT_CHARS} characters ({empty} empty): nothing to learn, and an "
          "empty sample gives a row with no target", force_warn=empty > 0)
    no_target = [t for t in texts if t.target is not None and not t.target.strip()]
    if no_target:
        t = no_target[0]
        obs.find("data.labels.no_target", "warning",
                 f"{len(no_target)} of {n} samples have an empty completion / assistant turn, e.g. line {t.line}: "
                 "after prompt masking they have no target token (NaN with a per-sample mean)",
                 f"{b.path}: line {t.line}", {"rows": len(no_target), "batch": len(no_target) == n})
        publish(obs, "data.labels.no_target", True)
        publish(obs, "data.labels.no_target_rows", len(no_target))
        publish(obs, "data.labels.no_target_batch", len(no_target) == n)
    _word_repeats(b, obs)
    if folder is not None:
        tokenised(b, spec, obs, folder)


def _escapes(text: str) -> bool:
    n = 0
    for m in ESCAPE_RE.finditer(text):
        word = m.group(1)
        if word[0] in "ntr" and len(word) > 1 and word in LATEX:
            continue
        n += 1
    return n > 0 and n > text.count("\n")


def _maybe_mojibake(text: str) -> bool:
    return "\u00c3" in text or "\u00c2" in text or "\u00e2\u20ac" in text


def _normalise(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split()).casefold()


def _rate(obs: Observations, b: Batch, fact: str, hits: list, n: int, warn: float, error: float | None,
          what: str, suffix: str = "", force_warn: bool = False, pattern: re.Pattern | None = None) -> None:
    """Publish ``fact`` = share of samples in ``hits``; one finding quoting the first, around
    ``pattern``'s first match when given."""
    rate = len(hits) / n if n else 0.0
    publish(obs, fact, round(rate, 4))
    if not hits:
        return
    severity = ("error" if error is not None and rate > error else
                "warning" if rate > warn or force_warn else "info")
    t = hits[0]
    m = pattern.search(t.text) if pattern is not None else None
    at = max(0, m.start() - 25) if m else 0
    sample = ("..." if at else "") + t.text[at:at + 60]
    level = " — pervasive: fix the pipeline before training" if severity == "error" else ""
    obs.find(fact, severity,
             f"{len(hits)} of {n} samples ({rate:.1%}) {what}; e.g. line {t.line}{suffix}: {sample!r}{level}",
             f"{b.path}: line {t.line}", round(rate, 4))


def _word_repeats(b: Batch, obs: Observations) -> None:
    """Periodic repeats on whitespace words (a tokenizer-free stand-in for OLMo's token filter)."""
    import torch

    mask = (1 << 62) - 1
    values: list[int] = []
    owners: list[int] = []
    checked = 0
    for i, t in enumerate(b.texts):
        words = t.text.split()
        # a pattern repeated >= 32 times repeats each of its words >= 32 times: cheap pre-filter
        if len(words) < TOKEN_DEFAULTS["repeat_min_repeats"] or \
                max(Counter(words).values()) < TOKEN_DEFAULTS["repeat_min_repeats"]:
            checked += 1
            continue
        if len(values) + len(words) > MAX_REPEAT_WORDS:
            obs.find("data.capped", "info", f"periodic-repeat check ran on the first {checked} of "
                     f"{len(b.texts)} samples (cap {MAX_REPEAT_WORDS} words)", str(b.path))
            break
        values.extend(hash(w) & mask for w in words)
        values.append(-(1 << 40) - i)
        owners.extend([i] * (len(words) + 1))
        checked += 1
    if not values:
        return
    hits = periodic_runs(torch.tensor(values, dtype=torch.long), TOKEN_DEFAULTS["repeat_max_period"],
                         TOKEN_DEFAULTS["repeat_min_repeats"])
    rows = sorted({owners[start] for start, _, _ in hits})
    if rows:
        start, period, length = hits[0]
        t = b.texts[owners[start]]
        obs.find("data.text.periodic_repeats", "warning",
                 f"{len(rows)} of {checked} samples hold a run of period <= {TOKEN_DEFAULTS['repeat_max_period']} "
                 f"words repeated >= {TOKEN_DEFAULTS['repeat_min_repeats']} times, e.g. line {t.line}: period "
                 f"{period}, {length // period} repeats; OLMo masks such samples out of the loss, trained on "
                 "they teach the model to loop", f"{b.path}: line {t.line}", {"rows": len(rows)})
    publish(obs, "data.repeats.rate", round(len(rows) / max(1, checked), 4))


def tokenised(b: Batch, spec: Specials, obs: Observations, folder: Path) -> None:
    """Tokenise the first MAX_TOKENIZE samples and run the token checks that text allows."""
    import torch

    tok, why = load_tokenizer(folder)
    if tok is None:
        obs.find("data.text.tokenizer_skipped", "info", f"token-level checks on text skipped: {why}", str(b.path))
        return
    rows, lines = [], []
    for t in b.texts[:MAX_TOKENIZE]:
        try:
            if t.messages and getattr(tok, "chat_template", None):
                out = tok.apply_chat_template(t.messages, tokenize=True)
                ids = out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out
            else:
                ids = tok(t.text)["input_ids"]
        except Exception as err:  # a template or tokenizer failure is itself worth reporting
            obs.find("data.text.tokenizer_failed", "warning",
                     f"tokenising line {t.line} failed: {str(err).splitlines()[0][:160]}", f"{b.path}: line {t.line}")
            return
        rows.append(torch.tensor(list(ids), dtype=torch.long))
        lines.append(t.line)
    if len(b.texts) > MAX_TOKENIZE:
        obs.find("data.capped", "info", f"tokenised the first {MAX_TOKENIZE} of {len(b.texts)} samples "
                 "for the token-level checks", str(b.path))
    width = max((len(r) for r in rows), default=0)
    if not width:
        return
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = r
    tb = Batch(path=b.path, fmt=b.fmt, seqs={"input_ids": ids}, lines=lines,
               lengths=torch.tensor([len(r) for r in rows]))
    valid = tb.valid
    origin = f"tokenised with {folder.name}'s tokenizer: "
    range_check(tb, ids, valid, spec, obs, origin)
    eos_checks(tb, ids, valid, valid, None, None, spec, spec.pad, obs, complete_rows=True, origin=origin)
    double_bos(tb, ids, valid, spec, obs, origin)
