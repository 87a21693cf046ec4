"""Words the report shares with each cause's own description: the weakest evidence there is.

Patterns (rules/_facts, rules/_signatures) read what they were written for; a report in other
words sets no fact, and its causes keep their priors. What still separates them is vocabulary: a
report about "pad_token = eos_token" and "never stops" shares distinctive words with the EOS
causes and none with the decoding one. Each cause's description is its title, summary, how
public reports of it were worded (``reported_as``), the ``says`` of its supporting evidence,
its fixes' titles, and the descriptions and phrases of the facts that support it; the report's
words (less the generic training words of matcher.GENERIC) are scored against them with BM25,
idf over all causes, so "loss" counts for little and "eos" for much.

Only what sets a candidate apart from the others counts: a cause at the candidates' mean score
keeps its odds, the best-sharing one gets ×e^ALPHA, the others in proportion to their distance
from the mean (below it, a factor under 1), within [1/CAP, CAP]; a small lead (under MIN_SPREAD,
a word or two) counts as small. Words only reorder: they never change a status
(engine.status_of ignores their line), a symptom's weight or the questions.
docs/knowledge-format.md, "Words shared with a cause", has the measurements.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

from .. import matcher
from ..knowledge.cache import memo
from ..knowledge.model import Cause, KnowledgeBase
from ..matcher import GENERIC, bounded, normalize, tokens
from ..prose import prose, without_settings

K1, B = 1.2, 0.75    # BM25's usual term saturation and length normalisation
ALPHA = 2.0          # the best-sharing candidate's factor is e^ALPHA ...
CAP = 4.0            # ... at most
MIN_SPREAD = 8.0     # a lead over the mean under this (a word or two) scales the factors down
SHOWN_WORDS = 4
# Verbs and adverbs of any story ("the loss went / became / suddenly turned nan") that cause
# descriptions quote in users' phrases: rare there, so idf would count them as distinctive.
NARRATIVE = frozenset(tokens("""went go goes going gone become becomes became becoming turn turns
turned turning suddenly start starts started starting begin begins began keep keeps kept
happen happens happened get gets got getting make makes made see saw seen show shows showed
find found look looks looked give gives gave take takes took come comes came always sometimes
often every each many few lot lots around about already now then later again quickly
python code error errors version versions support supported work works worked working use used
file files line lines run runs ran""")) | frozenset(  # Chinese words are their own tokens (bigrams)
    "用 跑 使用 运行 出现 开始 突然 一直 总是 经常 每次 然后 之后 后来 已经 现在".split())


# A command-line flag (`--save_steps 200`, `--lora_rank 4`) is a setting: its words ("save",
# "rank") say nothing about what went wrong, and settings that matter are facts already.
_FLAG = re.compile(r"(?<![\w-])--?[A-Za-z][\w.-]{0,80}")


class Overlap(NamedTuple):
    factor: float
    words: list[str]  # the report's words that contributed most, as the user wrote them


def overlaps(kb: KnowledgeBase, query: str, cause_ids: Iterable[str]) -> dict[str, Overlap]:
    """Per candidate cause, its factor and the shared words (none when the report shares nothing)."""
    index = memo(kb, "lexical", lambda: build_index(kb), code=(__file__, matcher.__file__),  # its tokens
                 valid=_index_shape)
    candidates = [cid for cid in dict.fromkeys(cause_ids) if cid in index["tf"]]
    if len(candidates) < 2:
        return {}
    text = _FLAG.sub(" ", without_settings(prose(bounded(query))))  # as the matcher reads a report: head and tail first
    # Neither "train", "model" (every report says them) nor the words naming a candidate's
    # symptom ("nan", "loss" for a NaN loss) say which cause it is.
    naming = {tok for cid in candidates for tok in index["naming"][kb.causes[cid].symptom]}
    report = set(tokens(text)) - GENERIC - NARRATIVE - naming
    idf = {tok: index["idf"][tok] for tok in report if tok in index["idf"]}
    scored = {cid: _bm25(index, cid, idf) for cid in candidates}
    mean = sum(score for score, _ in scored.values()) / len(scored)
    spread = max(max(score for score, _ in scored.values()) - mean, MIN_SPREAD)
    surface = _surface_forms(text)
    return {cid: Overlap(min(max(math.exp(ALPHA * (score - mean) / spread), 1 / CAP), CAP),
                         [surface.get(tok, tok) for tok in shared[:SHOWN_WORDS]])
            for cid, (score, shared) in scored.items()}


def _bm25(index: dict, cid: str, idf: dict[str, float]) -> tuple[float, list[str]]:
    """The BM25 score of one cause's description for the report's words, and the words by weight."""
    tf, length = index["tf"][cid], index["length"][cid]
    norm = K1 * (1 - B + B * length / index["average"])
    parts = {tok: weight * tf[tok] * (K1 + 1) / (tf[tok] + norm) for tok, weight in idf.items() if tok in tf}
    return sum(parts.values()), sorted(parts, key=lambda tok: (-parts[tok], tok))


def _surface_forms(text: str) -> dict[str, str]:
    """token -> the word as the report wrote it (stems read badly: 'generat')."""
    forms: dict[str, str] = {}
    for word in normalize(text).split():
        stems = tokens(word)
        if len(stems) == 1:  # an English word (a Chinese run gives bigrams, shown as they are)
            forms.setdefault(stems[0], word)
    return forms


def description(kb: KnowledgeBase, cause: Cause) -> str:
    """What the knowledge says about one cause, in words a report about it might share: of a
    supporting fact's text rules, only those whose value supports it ("DPO" sets the stage to
    rlhf, which a GRPO cause reads too, but it never says the run is GRPO)."""
    parts, facts, words = [cause.title, cause.summary, *(r.text for r in cause.reported_as)], set(), []
    for ev in cause.evidence:
        if ev.lr > 1:
            parts.append(ev.says)
            facts |= ev.when.facts
            words += [word for name in sorted(ev.when.facts) if name in kb.facts
                      for rule in kb.facts[name].text if _supports(ev.when, name, rule.set)
                      for word in rule.words]
    parts += [kb.fixes[fid].title for fid in cause.fixes if fid in kb.fixes]
    parts += [kb.facts[name].description for name in sorted(facts) if name in kb.facts]
    return "\n".join(part for part in [*parts, *dict.fromkeys(words)] if part)


def _supports(when, name: str, value) -> bool:
    """Whether a text rule setting ``name`` to ``value`` can make the condition hold (a rule that
    captures its value, or a condition that needs other facts too, may)."""
    return value is None or when.holds({name: value}) is not False


def build_index(kb: KnowledgeBase) -> dict:
    """Term counts per cause description, their lengths, and each term's idf (JSON-able)."""
    tf = {cid: dict(Counter(tokens(description(kb, cause)))) for cid, cause in kb.causes.items()}
    length = {cid: sum(counts.values()) for cid, counts in tf.items()}
    df = Counter(tok for counts in tf.values() for tok in counts)
    n = max(len(tf), 1)
    idf = {tok: math.log(1 + (n - count + 0.5) / (count + 0.5)) for tok, count in df.items()}
    naming = {sid: sorted(set(tokens(f"{s.id.replace('-', ' ')} {s.title}"))) for sid, s in kb.symptoms.items()}
    return {"tf": tf, "length": length, "idf": idf, "average": max(sum(length.values()) / n, 1.0),
            "naming": naming}


def _index_shape(index) -> bool:
    return (isinstance(index, dict) and set(index) == {"tf", "length", "idf", "average", "naming"}
            and all(isinstance(index[k], dict) for k in ("tf", "length", "idf", "naming")))
