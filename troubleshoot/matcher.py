"""Free text -> symptoms: how people write "loss went nan", "输出重复" or paste an error line.

Two signals, both explainable:

* **distinctive words** (weight 0.6): the query's words (English stems, Chinese character bigrams,
  typos snapped to the nearest known word with rapidfuzz) weighted by inverse symptom frequency,
  so "nccl" or "重复" count far more than "training" or "model", and by how typical the word is of
  the symptom (the share of its aliases that use it);
* **phrase similarity** (weight 0.4): rapidfuzz token-set similarity to the best alias, with short
  aliases discounted, and an alias pasted verbatim inside a long error text counting fully.

Scores are in [0, 1]; the caller decides what is a match (MIN_SCORE) and what is ambiguous.
``SymptomMatcher.verdict`` says how far to trust the best one: off-topic, weak, or a match
(thresholds measured in docs/knowledge-format.md, "How sure the match is").
"""
from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, field, replace

from rapidfuzz import fuzz, process

from .fault_words import asks_without_fault, names_only_a_topic, names_what_went_wrong
from .knowledge.cache import memo
from .knowledge.model import KnowledgeBase
from .prose import language, prose, without_settings

WORD_WEIGHT, PHRASE_WEIGHT = 0.6, 0.4
MIN_SCORE = 0.25          # below this nothing matched
AMBIGUOUS_MARGIN = 0.06   # top two closer than this: let the user pick
TYPO_CUTOFF = 84          # rapidfuzz ratio for snapping an unknown word to a known one
PASTED_DISCOUNT = 0.9     # an alias found (fuzzily) inside a longer report
MAX_MATCH_CHARS = 8000    # a longer paste is matched on its head and tail (docs/resource-policy.md)
CAUSE_TEXT_WEIGHT = 0.3   # words from cause titles count less than alias words
MESSAGE_WORDS = 14        # an error alias this many words long is a sentence-long message ...
MESSAGE_TEXT_WEIGHT = 0.35  # ... whose words no other alias of the symptom uses count this much at most
WEAK_MATCH = 0.35         # below this best score the match is only a guess: show candidates, ask
ANCHOR_SHARE = 0.4        # off-topic: no query word has this share of the highest idf (a word of one symptom)
MIN_KNOWN_SHARE = 0.5     # weak: fewer of the query's English words than this are known words ...
ENOUGH_KNOWN_WORDS = 8    # ... unless this many are: a long report tells its story in other words too
TYPICAL_SHARE_SCALE = 6   # a word in a sixth of a symptom's aliases gets the full weight
ONE_ALIAS_WEIGHT = 0.45   # a word only one of a symptom's aliases uses is as often incidental as typical
REPORT_WORDS = 8          # the word signal is a share of at most this many distinctive words' idf
HEADLINE_WEIGHT = 0.4     # a confident first line's share of a report's scores (tune half: 0.3-0.5 alike)
HEADLINE_CHARS = 200      # a longer first line is prose or a paste, not a title
WHOLE_ALIAS_CHARS = 6     # a shorter alias ('oom', 'nan') standing in a text is a word, not a phrase
OWN_WORD = 0.8            # a question is about a symptom through words this typical of it (in a tenth of its aliases)
HEADLINE_MIN = 0.45       # a confident headline ("Traceback (most recent call last):" scores 0.38)
NAMED_FAULT_ANCHOR = 0.45  # a text naming a fault anchors a best match this confident ("loss一直是0")

STOPWORDS = frozenset("""
a an the is are was were be been being to of in on at for with and or but not no my our your i we
it its this that these those when while after before during from by as than then so if how why what
do does did doing have has had get gets got getting can could should would will just very too also
after about into out up down over again any some all only same there here which who still even
how fix fixing solve issue problem help please bug question anyone got use using try tried via
like feel feels seem seems weird much really strange normal expected possible cause reason""".split())
# Words every training report uses: they count a fifth as much as a distinctive word.
GENERIC = frozenset("""
train training trained model models step steps epoch epochs iteration fine tune tuning finetune
finetuning pretrain pretraining run running llama qwen gpt bert deepspeed megatron trainer huggingface
训练 练过 过程 程中 模型 时候 预训 的时 中的 进行 使用
""".split())
# That something failed ("报错", "error", "RuntimeError") or that settings and code were involved
# ("config", "参数", "脚本") is said of every symptom alike: on its own it names none, so these count
# as little as the generic words when a symptom is matched (cause evidence still reads them).
VAGUE = frozenset("""
config setting param code script error failur failure
runtimeerror valueerror typeerror attributeerror importerror indexerror assertionerror
参数 设置 配置 代码 脚本 报错 错误 出错 失败
""".split())
GENERIC_WEIGHT = 0.2
# Chinese filler bigrams ("how to solve", "problem", "appears", "always": 一直, 始终) that say
# nothing about the symptom.
CJK_STOP = frozenset("怎么 么解 解决 问题 出现 现了 为什 什么 如何 一直 始终 时候 "
                     "之后 以后 请问 求助 办法 怎样 能够 可以".split())
# Function characters that say nothing when they stand alone between other words.
CJK_STOP_CHARS = frozenset("的在了是和与也就都很我你他她它这那吗呢吧啊个一会时后被把让给从对到有要说么着而及或但")

# A first line that asks for a feature, a release or a document is a request, not a report of
# something going wrong: "[Feature]", "[RFC]", "Add/Support/Document X" (a pull request's title),
# "could you share the config", "is there a plan", "是否会支持", "有没有训练脚本".
_REQUEST = re.compile(r"\[feature|feature request|\bany plans?\b|\bplans? to support|\bplease support|\badd support"
                      r"|\bsupport for\b|\bwould be (?:nice|great)|支持一下|可以支持|能否支持|是否支持|希望支持|希望能"
                      r"|能不能支持|新增功能|功能请求|feature\s*:"
                      r"|^\W{0,8}(?:\[rfc|rfc\b|(?:add|support|implement|document|improve|enable|introduce)\s)"
                      r"|\bis there (?:a|any) plan|\bplan(?:s|ned)? to (?:release|add|open)"
                      r"|\b(?:could|can|would|will) you (?:please )?"
                      r"(?:share|release|provide|open.?source|upload|publish)\b"
                      r"|\b(?:configs?|scripts?|code|recipes?|docs?|documentation|tutorials?|checkpoints?|weights) "
                      r"(?:available|released)\b|\bavailable\s*\?"
                      r"|会支持|支持[^，。,.!！]{0,20}[吗么]|(?:提供|开源|发布|分享)[^，。,.!！]{0,12}(?:代码|脚本|配置|权重|文档)"
                      r"|(?:微调|训练)(?:的)?(?:文档|教程|脚本)", re.IGNORECASE)
# Characters that glue words together ("显存很大", "训练的时候"): no bigram is made across one.
CJK_GLUE = "的了是吗呢吧啊把被着很都就也在和"
_CJK_GLUE = re.compile(f"[{CJK_GLUE}]")
# 0, 0.0, 0.0000 standing alone (not 10, 0.01, v0, cuda0)
_ZERO = re.compile(r"(?<![0-9A-Za-z.])0(?:\.0+)?(?!\.?[0-9A-Za-z])")
# a digit run is tried from its start only: "9" * 100_000 was retried from every digit (quadratic)
_TOKEN = r"[a-z][a-z0-9]*|(?<![0-9])[0-9]+[a-z][a-z0-9]*"
# An expression with the Chinese character class costs ~1 ms to compile (a 27,000-character set), so
# text without Chinese (normalized text is ASCII exactly then) is read with the ASCII-only forms.
_CJK_TOKEN = _TOKEN + r"|[\u3400-\u9fff]+"


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    return re.sub(r"[^0-9a-z]+" if text.isascii() else r"[^0-9a-z\u3400-\u9fff]+", " ", text).strip()


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix) and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def tokens(text: str) -> list[str]:
    """English stems and Chinese character bigrams (a lone character stays a unigram)."""
    out = []
    norm = normalize(text)
    for tok in re.findall(_TOKEN if norm.isascii() else _CJK_TOKEN, norm):
        if "\u3400" <= tok[0] <= "\u9fff":
            for run in _CJK_GLUE.split(tok):  # a bigram across a glue character spans two words
                grams = [run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)]
                out.extend(g for g in grams if g and g not in CJK_STOP and g not in CJK_STOP_CHARS)
        elif tok not in STOPWORDS and len(tok) > 1:
            out.append(_stem(tok))
    return out


def match_tokens(text: str) -> list[str]:
    """``tokens`` as the symptom matcher reads them: a value of exactly zero ("loss 0", "loss为0.0")
    is the word 'zero', since zero-loss is told by that number while other numbers (steps, sizes,
    rates) are no words. Cause evidence (evidence/lexical.py) keeps plain ``tokens``: there a 0 is
    as often a count ('trainable params: 0') as a loss."""
    return tokens(_ZERO.sub(" zero ", text))


@dataclass
class _Entry:
    id: str
    title: str
    phrases: list[str]
    words: dict[str, float] = field(default_factory=dict)  # token -> weight in (0, 1]


@dataclass
class Match:
    id: str
    title: str
    score: float
    words: float
    phrase: float
    best_alias: str


class SymptomMatcher:
    def __init__(self, kb: KnowledgeBase) -> None:
        index = memo(kb, "matcher", lambda: build_index(kb), code=__file__, valid=_index_shape)
        self.entries = [_Entry(**entry) for entry in index["entries"]]
        self.idf = index["idf"]
        self.vocab = list(self.idf)
        # A long report is not diluted by its length: its best symptom needs no more distinctive
        # words than a query of REPORT_WORDS words would (its context words lower nobody's rank).
        self.top_idf = math.log(1 + len(self.entries))  # a word of one symptom only
        self.word_mass_cap = REPORT_WORDS * self.top_idf

    def _known(self, query_tokens: list[str]) -> list[str]:
        """Snap unknown words to the nearest known word (typos: 'overflwo', 'nccl timout')."""
        known = []
        for tok in dict.fromkeys(query_tokens):
            if tok in self.idf:
                known.append(tok)
            elif len(tok) >= 4 and tok.isascii():
                hit = process.extractOne(tok, self.vocab, scorer=fuzz.ratio, score_cutoff=TYPO_CUTOFF)
                if hit:
                    known.append(hit[0])
        return known

    def match_report(self, report: str, limit: int | None = None) -> list[Match]:
        """``match`` on what a pasted report says (``prose``): its head and tail when long, without
        template headings, links, paths, versions and a pasted launch script's settings, which say
        nothing about the problem.

        A report's first line is its headline (an issue title, "loss 不下降"): when it alone is a
        confident match (HEADLINE_MIN), it counts HEADLINE_WEIGHT of every score, so a pasted log below that
        mentions NaN, OOM or masks everywhere does not outvote what the writer said went wrong."""
        report = bounded(report)
        ranked = self.match(without_settings(prose(report)))
        head = headline(report)
        heads = self.match(prose(head)) if head else []
        if heads and heads[0].score >= HEADLINE_MIN:
            by_id = {m.id: m.score for m in heads}
            ranked = sorted((replace(m, score=round((1 - HEADLINE_WEIGHT) * m.score + HEADLINE_WEIGHT * by_id[m.id], 4))
                             for m in ranked), key=lambda m: (-m.score, m.id))
        return ranked[:limit] if limit else ranked

    def match(self, query: str, limit: int | None = None) -> list[Match]:
        """Every symptom scored against ``query`` as written (the site's search box mirrors this)."""
        query = bounded(query)
        norm = normalize(query)
        known = self._known(match_tokens(query))
        total = min(sum(self.idf[t] for t in known), self.word_mass_cap) or 1.0
        results = []
        for entry in self.entries:
            words = min(1.0, sum(self.idf[t] * entry.words[t] for t in known if t in entry.words) / total)
            phrase, alias = self._phrase(norm, entry)
            score = WORD_WEIGHT * words + PHRASE_WEIGHT * phrase
            results.append(Match(entry.id, entry.title, round(score, 4), words, phrase, alias))
        results.sort(key=lambda m: (-m.score, m.id))
        return results[:limit] if limit else results

    def verdict(self, query: str, matches: list[Match]) -> str:
        """'off-topic', 'weak' or 'match' for the best of ``matches`` (from ``match(query)``).

        Off-topic: the first line asks for a feature ("[Feature]", "any plans", "可以支持"), the
        text asks how to do or choose something or says the run is fine and names no fault
        (``fault_words.asks_without_fault``: "how many epochs should I train", "loss is still going
        down, is that normal?"), the best score is under MIN_SCORE, or no word of the query is itself a
        distinctive known word (typo snapping turns 'bread' into 'read'; this does not count),
        no alias of the best symptom stands whole in it (an alias such as 'loss is 0' is distinctive
        through its numbers, which are not words) and no fault word backs a confident match
        (``_anchored``).
        Weak: the best score is under WEAK_MATCH, or most of the English words the writer wrote
        (not code, identifiers or template text: ``prose.language``) are unknown, in a report
        written mainly in English, or the text is a one-line title naming only a method, model or
        stage and no fault (``fault_words.names_only_a_topic``: "DPO training", "Qwen3 fine-tuning",
        "LoRA merge"): the symptoms it is close to are listed, none is claimed."""
        query = bounded(query)
        if _REQUEST.search(first_line(query)):
            return "off-topic"
        if asks_without_fault(prose(query)):
            return self._question_verdict(query, matches)
        if not matches or matches[0].score < MIN_SCORE or not self._anchored(query, matches[0]):
            return "off-topic"
        if matches[0].score < WEAK_MATCH or self._mostly_unknown(language(query)):
            return "weak"
        if names_only_a_topic(prose(query)):
            return "weak"
        return "match"

    def _anchored(self, query: str, best: Match) -> bool:
        """The match rests on the writer's words: a distinctive word of the text, an alias of the
        best symptom standing whole in it, or a confident match (NAMED_FAULT_ANCHOR) to a text that
        says what went wrong: "loss一直是0" uses only shared words (loss, a zero) and no alias
        whole. That something errored ("微调chatglm2报错") says no symptom."""
        return bool(self._distinctive_words(query) or self._whole_alias(query, best)
                    or best.score >= NAMED_FAULT_ANCHOR and names_what_went_wrong(prose(query)))

    def _question_verdict(self, query: str, matches: list[Match]) -> str:
        """How sure a question that names no fault is about the best symptom: a match when it
        uses a word of that symptom alone that many of its aliases use (OWN_WORD: initializer,
        router, 初始化: the knowledge answers how to set it) or one of its aliases whole ("rope
        scaling"); weak when it uses a distinctive word typical of the symptom but shared with
        others (init std, checkpoint, mask); otherwise off-topic ("how do I enable flash attention", "loss is still
        going down, is that normal?", "学习率设置多少合适")."""
        if not matches or matches[0].score < MIN_SCORE:
            return "off-topic"
        best = matches[0]
        entry = next(e for e in self.entries if e.id == best.id)
        own = [w for w in self._distinctive_words(query) if entry.words.get(w, 0) >= OWN_WORD]
        if self._whole_alias(query, best) or any(self.idf[w] >= self.top_idf for w in own):
            return "match"
        return "weak" if own else "off-topic"

    def names_no_fault(self, query: str) -> bool:
        """The text is about training (it uses a distinctive known word) but asks for a feature
        or document, asks how to do or choose something, or says the run is fine, and names no
        fault: what ``llmfix ask`` answers with "no fault described" rather than "not covered"."""
        query = bounded(query)
        return bool((_REQUEST.search(first_line(query)) or asks_without_fault(prose(query)))
                    and self._distinctive_words(query))

    def _distinctive_words(self, query: str) -> list[str]:
        """The query's own known words (typo snapping does not count: 'bread' is no 'read') that
        are distinctive: idf at least ANCHOR_SHARE of the highest (a word of about half of the
        symptoms or fewer, and no generic word)."""
        words = dict.fromkeys(match_tokens(prose(query)))
        return [w for w in words if self.idf.get(w, 0) >= ANCHOR_SHARE * self.top_idf]

    def _whole_alias(self, query: str, best: Match) -> bool:
        """One of ``best``'s aliases of WHOLE_ALIAS_CHARS or more stands word for word in ``query``
        ('loss is 0' typed as such, or inside 'training loss is 0')."""
        if best.phrase >= 1:
            return True
        padded = f" {normalize(query)} "
        entry = next(e for e in self.entries if e.id == best.id)
        return any(len(a) >= WHOLE_ALIAS_CHARS and f" {a} " in padded for a in entry.phrases)

    def _mostly_unknown(self, words_text: str) -> bool:
        """Fewer than MIN_KNOWN_SHARE of two or more English words are known words, and English is
        the report's language (the English names in a Chinese report are no measure of it). A
        long report that uses ENOUGH_KNOWN_WORDS known words is not weak for its other words."""
        words = list(dict.fromkeys(match_tokens(words_text)))
        latin = [w for w in words if w.isascii()]
        if len(latin) < 2 or len(latin) < len(words) - len(latin):
            return False
        known = sum(w in self.idf for w in latin)
        return known < ENOUGH_KNOWN_WORDS and known < MIN_KNOWN_SHARE * len(latin)

    @staticmethod
    def _phrase(norm: str, entry: _Entry) -> tuple[float, str]:
        """Best alias similarity: whole-string (word order free) or an alias pasted inside a longer
        report. Short aliases are discounted: 'nan' matching says less than a whole sentence."""
        best, best_alias = 0.0, ""
        if not norm:
            return 0.0, ""
        for alias in entry.phrases:
            if len(alias) >= 10 and alias in norm:
                return 1.0, alias
            score = max(fuzz.ratio(norm, alias), fuzz.token_sort_ratio(norm, alias)) / 100
            if len(alias) >= 8 and len(norm) > 1.5 * len(alias):
                score = max(score, PASTED_DISCOUNT * fuzz.partial_ratio(alias, norm) / 100)
            score *= min(1.0, (len(alias) + 6) / 20)
            if score > best:
                best, best_alias = score, alias
        return best, best_alias


def first_line(report: str) -> str:
    """The report's first non-blank line (where a title or a feature request stands)."""
    return next((line for line in report.strip().splitlines() if line.strip()), "")


def headline(report: str) -> str | None:
    """The first line of a report of several lines, when it is short enough to be a title."""
    lines = [line.strip() for line in report.strip().splitlines() if line.strip()]
    return lines[0] if len(lines) > 1 and len(lines[0]) <= HEADLINE_CHARS else None


def bounded(query: str) -> str:
    """At most MAX_MATCH_CHARS of a long paste: its head (the user's words) and its tail (where a
    traceback ends with the error), so matching stays fast whatever was pasted."""
    if len(query) <= MAX_MATCH_CHARS:
        return query
    half = MAX_MATCH_CHARS // 2
    return query[:half] + "\n...\n" + query[-half:]


def _index_shape(index) -> bool:
    return (isinstance(index, dict) and isinstance(index.get("idf"), dict) and isinstance(index.get("entries"), list)
            and all(isinstance(e, dict) and set(e) == {"id", "title", "phrases", "words"} for e in index["entries"]))


def build_index(kb: KnowledgeBase) -> dict:
    """Per symptom its phrases and weighted words, and the idf of every word (JSON-able)."""
    entries = []
    for s in kb.symptoms.values():
        aliases = s.all_aliases() + [s.id.replace("-", " ")]
        messages = {a for a in s.aliases.get("errors", ()) if len(a.split()) >= MESSAGE_WORDS}
        words: dict[str, float] = {}
        for cause in s.causes:
            for tok in match_tokens(cause.title):
                words.setdefault(tok, CAUSE_TEXT_WEIGHT)
        # A long pasted message is mostly its sentence ("... might run on corrupted data", "due to",
        # "the stacktrace below might be incorrect"): words people write about any symptom. The
        # message itself is matched whole by the phrase signal when pasted; its words alone say little.
        counts: dict[str, int] = {}
        written: set[str] = set()  # words of the aliases that are not such messages
        for alias in aliases:
            toks = set(match_tokens(alias))
            for tok in toks:
                counts[tok] = counts.get(tok, 0) + 1
            if alias not in messages:
                written |= toks
        for tok, count in counts.items():
            # A word in many of this symptom's aliases is more typical of it than one in a few; a
            # word in a single alias ("开始", "显示") is context more often than the symptom.
            typical = 0.5 + 0.5 * min(1.0, TYPICAL_SHARE_SCALE * count / len(aliases))
            words[tok] = min(typical, ONE_ALIAS_WEIGHT) if count == 1 else typical
            if tok not in written:
                words[tok] = min(words[tok], MESSAGE_TEXT_WEIGHT)
        entries.append({"id": s.id, "title": s.title, "phrases": [normalize(a) for a in s.all_aliases()],
                        "words": words})
    df: dict[str, int] = {}
    for entry in entries:
        for tok in entry["words"]:
            df[tok] = df.get(tok, 0) + 1
    n = max(len(entries), 1)
    idf = {tok: math.log(1 + n / count) * (GENERIC_WEIGHT if tok in GENERIC or tok in VAGUE else 1.0)
           for tok, count in df.items()}
    return {"entries": entries, "idf": idf}


def pick(matches: list[Match]) -> tuple[list[Match], bool]:
    """The matches worth considering, and whether the user should choose among them."""
    good = [m for m in matches if m.score >= MIN_SCORE]
    if not good:
        return [], False
    close = [m for m in good if good[0].score - m.score < AMBIGUOUS_MARGIN][:3]
    return close, len(close) > 1
