"""Is a phrase negated where it stands? "not using fp16", "without gradient clipping",
"没有用fp16", "--no-fp16", "fp16: false", "switched from fp16 to bf16", and a denial later in the
same clause: "I looked for NaN in the data and there is none", "the eos masking is not the issue".
A negated participle before a time phrase denies the participle, not the time: "the optimizer
state was not correctly loaded after resume" still says it happened after a resume.

A negated match never sets a fact positively: it sets the rule's ``negated`` value or nothing.
The look-back stays inside the clause (it stops at . ; , : ! ? and their Chinese forms, at a
newline, and at a conjunction that opens a clause: "because", "since", "but", "which", "因为",
"所以", "但", "而" ...: "does not stop because eos is ..." leaves the eos alone), over at most
ENGLISH_WINDOW characters for English negators and CHINESE_WINDOW for Chinese ones, which sit
right before what they negate ("没有用fp16", "不开bf16").
"""
from __future__ import annotations

import re
from functools import cache

ENGLISH_WINDOW, CHINESE_WINDOW = 40, 5
LOOK_AHEAD = 48  # enough for "as the eos token is"
DENIAL_WINDOW = 48  # "... in the data and there is none", "... 已排除"


# Each expression needs at least one character, so an empty window is never searched.
_SOURCES = {
    # a new clause: punctuation, or a conjunction that starts one ("does not stop because eos ...",
    # "不停止因为eos ..."); "as" and "and" only before a subject, "so" not after a negator ("not so")
    "clause_end": (
        r"[.;,!?\n。；，！？:：]|\b(?:but|however|because|cuz|coz|since|although|though|whereas|while|"
        r"which|that|why|when|whenever|if|whether|unless|until|otherwise|due\s{1,3}to)\b"
        r"|(?<!not\s)(?<!n't\s)(?<!or\s)(?<!and\s)\bso\b"
        r"|\b(?:as|and)\s{1,3}(?=(?:it|we|i|they|he|she|you|there"
        r"|the\s{1,3}[\w-]{1,20}(?:\s{1,3}[\w-]{1,20})?\s{1,3}(?:is|was|are|were|has|had|keeps?))\b)"
        r"|因为|由于|所以|因此|于是|但是|但|而|不过|可是|然而|虽然|尽管|如果|要是|结果|导致", re.IGNORECASE),
    "english": (
        r"(?<![A-Za-z])(?:not|no|never|without|w/o|disabled?|disabling|turn(?:ed)?\s{1,3}off|instead\s{1,3}of|"
        r"rather\s{1,3}than|switch(?:ed|ing)?\s{1,3}(?:away\s{1,3})?from|moved?\s{1,3}from|changed?\s{1,3}from|"
        r"\w{1,12}n't|isnt|dont|doesnt|didnt|wasnt|arent|cannot)(?![A-Za-z])", re.IGNORECASE),
    "chinese": (r"没有|没用|没开|没|不用|不开|不使用|(?<!是)不是|未|无|关闭|关掉|禁用|去掉|而非|而不是|从", 0),
    # a turn between a negator and the match: "from fp16 to bf16", "从fp16改成bf16"
    "turn": (r"(?<![A-Za-z])(?:to|into|then|now|->)(?![A-Za-z])|→|改成|换成|改为|换到|改用|到", re.IGNORECASE),
    # a denial after the match in its own clause (no comma, no "but"/"because" in between): "and
    # there is none", "is not the issue", "was ruled out", "looks fine", "已排除", "不是原因";
    # not "nothing helps" or "it was fine before" (those deny something else)
    "denied_after": (
        r"(?:(?!\b(?:but|however|because|since|although|though|while|whereas|except)\b)[^.;,!?\n。；，！？]){0,40}?"
        r"(?:\b(?:there\s{1,3}(?:is|are|was|were)\s{1,3}(?:none|nothing)|found\s{1,3}(?:none|nothing)|none\s{1,3}(?:found|there))\b"
        r"|\b(?:is|was|are|were)(?:\s{1,3}not|n't)\s{1,3}(?:the\s{1,3}|an?\s{1,3})?(?:problem|issue|cause|culprit|reason)\b"
        r"|\b(?:was|were|been|is|are)\s{1,3}ruled\s{1,3}out\b"
        r"|\b(?:looks?|looked|seems?|seemed)\s{1,3}(?:fine|ok|okay|correct|normal|right)\b(?!\s{1,3}(?:before|until|at\s{1,3}first|initially|earlier))"
        r"|已排除|排除了|不是(?:问题|原因)|并非(?:问题|原因))",
        re.IGNORECASE),
    # a match that opens with when it happened ("after resume", "during eval") after a negated
    # participle: "was not correctly loaded after resume" denies the loading, not the resume
    "time_phrase": (r"(?:after|during|when|while|before|since|upon|once)\b", re.IGNORECASE),
    "participle": (r"(?<![A-Za-z])(?:[a-z]{2,30}ed|saved|done|set|kept|built|written|taken|given|shown|seen|put)"
                   r"(?![A-Za-z])", re.IGNORECASE),
    "flag_off": (r"(?:--no[-_]|no[-_])$", re.IGNORECASE),
    "value_off": (
        r"[\"']?\s{0,3}[:=]\s{0,3}(?:\{\s{0,3}[\"']?enabled[\"']?\s{0,3}:\s{0,3})?[\"']?"
        r"(?:false|0|none|no|off|disabled?)(?![\w.])"
        r"|\s{1,3}(?:is\s{1,3}|was\s{1,3})?(?:off|disabled)(?![\w.])|\s{0,3}(?:关闭|关掉|没开|没有开)", re.IGNORECASE),
}


@cache
def _rx(name: str) -> re.Pattern:
    """One expression, compiled on first use: most questions hold no phrase to check, and most
    checks need only some of them."""
    source, flags = _SOURCES[name]
    return re.compile(source, flags)


def negated(text: str, start: int, end: int) -> bool:
    """True when the match text[start:end] is negated by the words around it."""
    before = _clause_before(text, start)
    if before and _rx("flag_off").search(before[-6:]):
        return True
    if end < len(text) and _rx("value_off").match(text, end, min(len(text), end + 40)):
        return True
    if end < len(text) and _rx("denied_after").match(text, end, min(len(text), end + DENIAL_WINDOW)):
        return True
    if _rx("time_phrase").match(text, start, end) and _denies_a_participle(before[-ENGLISH_WINDOW:]):
        return False
    return (_negator_applies("english", before[-ENGLISH_WINDOW:])
            or _negator_applies("chinese", before[-CHINESE_WINDOW:]))


def _denies_a_participle(before: str) -> bool:
    """The last English negator before the match negates a participle between them ("not
    correctly loaded"), so a time phrase that follows only says when that happened."""
    last = _last("english", before)
    return last is not None and bool(_rx("participle").search(before, last.end()))


def _negator_applies(negators: str, before: str) -> bool:
    """The last negator before the match applies unless a turn lies between them."""
    last = _last(negators, before)
    return last is not None and not _rx("turn").search(before, last.end())


def _last(negators: str, before: str) -> re.Match | None:
    """The last negator of this kind before the match, if any."""
    return next(reversed(list(_rx(negators).finditer(before))), None) if before else None


def _clause_before(text: str, start: int) -> str:
    """The part of the clause before ``start`` (at most ENGLISH_WINDOW characters). A boundary
    may look past ``start`` ("as the eos token is ..."), so the search reads a little beyond it."""
    low = max(0, start - ENGLISH_WINDOW)
    ends = [m.end() for m in _rx("clause_end").finditer(text, low, min(len(text), start + LOOK_AHEAD))
            if m.end() <= start]
    return text[ends[-1] if ends else low:start]
