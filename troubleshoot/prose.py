"""What of a pasted report is the writer's own language, for the symptom matcher.

Real reports come in issue templates (transformers, LLaMA-Factory, DeepSpeed, ChatGLM): headings
such as "System Info", "Reproduction", "### 复现", checkbox lines, environment lines
(`- Python version: 3.10`), links and paths. None of it says what went wrong, yet every word of it
counts as an unknown English word, and a long, clear report would read as a guess.

* ``prose(text)``: the report without template boilerplate, URLs, directories, version strings
  and hashes (a file keeps its name, `convert.py` is `convert`; a link its repository,
  `github.com/ggerganov/llama.cpp/pull/1` is `llama cpp`); what the matcher scores (pasted error
  lines stay: they match error aliases).
* ``language(text)``: ``prose`` without code (fenced blocks, backticks) and code identifiers
  (`grad_norm`, `model.half`, `gradientCheckpointing`, `4090ti`): the words whose share of known
  words decides whether a match is weak.
* ``is_chinese(text)``: whether the writer's own words are mainly Chinese (the language llmfix
  answers a text in when it has no diagnosis to give).
* ``rules()``: the headings and expressions ``prose`` applies, which the site's search box applies
  too (site/export.py writes them into its data, static/llmfix.js repeats ``prose``'s steps).
  Word, digit and word-boundary classes mean ASCII in a browser: every expression using them is re.ASCII.
"""
from __future__ import annotations

import re

# Headings of the issue templates people fill in (compared without '#', '*', ':' and case).
TEMPLATE_HEADINGS = frozenset("""
system info|system information|environment|environment info|environment information|
who can help?|information|tasks|reproduction|to reproduce|steps to reproduce|reproduce|
expected behavior|expected behaviour|current behavior|current behaviour|actual behavior|
actual behaviour|others|other|describe the bug|bug description|description|reminder|
additional context|additional information|screenshots|logs|error message|error log|
is there an existing issue for this?|anything else?|launcher|minimal reproducible example|
your contribution|motivation|feature request|checklist|before submitting|
your hardware and system info|hardware and system info|how to reproduce|what happened|
复现|复现方法|复现步骤|复现过程|预期行为|期望行为|期待表现|预期结果|当前行为|实际行为|系统信息|系統信息|环境信息|运行环境|环境|
其他信息|其他|问题描述|报错信息|错误信息|补充信息|是否已有关于该错误的issue或讨论?|
""".replace("\n", "").split("|")) - {""}
# Questions and prompts a template prints for the reporter to replace.
_PROMPTS = re.compile(
    r"a clear and concise description of [^.\n]{0,120}\.?|put your message here\.?|"
    r"steps to reproduce the behavior:?|请在此处填写[^。\n]{0,60}", re.IGNORECASE)
_HEADING_MARKS = re.compile(r"^[\s#>*_]{0,12}|[\s*_:：]{0,12}$")
_CHECKBOX = re.compile(r"^\s{0,8}[-*+]\s{0,3}\[[ xX✓]?\]")
# `- Python version: 3.10`, `- 平台：Linux`: an environment line; the key decides.
_ENV_LINE = re.compile(r"^\s{0,8}[-*+]?\s{0,3}`?(?P<key>[^:：\n]{1,60}?)`?\s{0,3}[:：]")
_ENV_KEYS = re.compile(
    r"(?:version|版本)(?:\s{0,3}\([^)]{0,20}\))?\??$|^(?:platform|os|operating system|system|python|"
    r"gpu|gpus|gpu type|gpu model|gpu models and configuration|cuda|cudnn|driver|nvidia driver|"
    r"accelerate config|deepspeed config|using gpu in script\??|"
    r"using distributed or parallel set-?up in script\??|hardware|machine|"
    r"平台|系统|操作系统|显卡|硬件|驱动)$", re.IGNORECASE)
# `- PyTorch: 2.0`, `Transformers:4.27.1`: a name and its version, unless the name is a metric.
_PACKAGE_VERSION = re.compile(r"v?\d{1,6}\.\d{1,6}\S{0,30}(?:\s{1,3}\([^)]{0,30}\))?$", re.ASCII)
_METRIC = re.compile(r"loss|norm|\blr\b|rate|step|epoch|acc|reward|kl|scale|ppl|perplexity|损失|学习率",
                     re.IGNORECASE | re.ASCII)

_URL = re.compile(r"\b(?:https?://|www\.)\S{1,2000}|(?<!\w)@[\w-]{1,40}", re.IGNORECASE | re.ASCII)  # and @mentions
_PATH = re.compile(
    r"(?:(?<![\w.])(?:~/|\.{1,2}/|/[\w.+@-]{1,200}/)(?:[\w.+@-]{1,200}/){0,30}[\w.+@-]{1,200}"  # /a/b, ./x, ~/x
    r"|\b[a-zA-Z]:\\[^\s]{1,500}"                                              # C:\x\y
    r"|\b[\w.-]{1,200}\.(?:py|sh|yaml|yml|json|jsonl|txt|log|md|bin|pt|pth|safetensors|ckpt|"
    r"gguf|csv|parquet|ipynb|toml|cfg|cpp|cu|h)\b)", re.ASCII)
# 0.14.3, v0.9.5, 2.0.1+cu118, 4.46.0.dev0 (not 0.0 or 3.5: a loss value is no version)
_VERSION = re.compile(r"(?<![\w.])(?:v\d{1,6}(?:\.\d{1,6}){1,4}|\d{1,6}(?:\.\d{1,6}){2,4}|\d{1,6}\.\d{1,6}(?=[+]))"
                      r"(?:[-+.]?[a-z][\w.]{0,20})?(?![\w.])", re.IGNORECASE | re.ASCII)
_HASH = re.compile(r"\b(?=[0-9a-f]{0,39}\d)(?=[0-9a-f]{0,39}[a-f])[0-9a-f]{7,40}\b", re.ASCII)

_FENCE = re.compile(r"^\s{0,3}(```|~~~)[^\n]{0,200}\n.{0,2000000}?^\s{0,3}\1", re.MULTILINE | re.DOTALL)
_BACKTICKS = re.compile(r"`[^`\n]{1,300}`")
# grad_norm, model.half, torch.float16, gradientCheckpointing, LlamaForCausalLM, 4090ti, fp16? no:
# a short word with a digit (fp16, bf16, a100) is how people name things, so it stays.
_IDENTIFIER = re.compile(
    r"(?<![\w.])(?:\w{1,100}_\w{0,100}|\w{1,100}(?:\.\w{1,100}){1,10}|[a-z]{1,50}[A-Z]\w{0,100}"
    r"|[A-Z]{1,4}[a-z]{1,30}[A-Z]\w{0,100}|\d{1,10}[a-zA-Z]{1,10}\w{0,20})(?![\w.])", re.ASCII)


def prose(text: str) -> str:
    """``text`` without template headings, checkbox and environment lines, template prompts,
    URLs, file paths, version strings and commit hashes."""
    lines = [line for line in text.splitlines() if not _template_line(line)]
    out = _URL.sub(_repository, _PROMPTS.sub(" ", "\n".join(lines)))
    out = _PATH.sub(_file_name, out)
    for pattern in (_HASH, _VERSION):
        out = pattern.sub(" ", out)
    return out


_REPO_URL = re.compile(r"(?:github\.com|gitlab\.com|huggingface\.co)/[\w.-]{1,100}/(?P<repo>[\w.-]{1,100})", re.ASCII)


def _repository(url: re.Match) -> str:
    """A link says what it is about through the repository it points to: `.../ggerganov/llama.cpp/pull/1`
    -> `llama.cpp`; anything else in it is noise."""
    repo = _REPO_URL.search(url.group(0))
    return " " + repo.group("repo").replace(".", " ") + " " if repo else " "


def _file_name(path: re.Match) -> str:
    """A path says what it is through its file name only: `tools/convert.py` -> `convert`."""
    name = re.split(r"[/\\]", path.group(0))[-1]
    return " " + name.rsplit(".", 1)[0] + " " if "." in name else " "


def rules() -> dict:
    """What ``prose`` removes, by the role each expression plays in it (``match``: anchored at the
    start of the text; ``search``: anywhere; ``sub``: every occurrence replaced)."""
    return {"headings": sorted(TEMPLATE_HEADINGS),
            "match": {"checkbox": _CHECKBOX, "env_line": _ENV_LINE, "package_version": _PACKAGE_VERSION},
            "search": {"env_keys": _ENV_KEYS, "metric": _METRIC, "repo_url": _REPO_URL},
            "sub": {"heading_marks": _HEADING_MARKS, "prompts": _PROMPTS, "url": _URL, "path": _PATH,
                    "hash": _HASH, "version": _VERSION}}


def language(text: str) -> str:
    """The writer's own words: ``prose`` without code blocks, inline code and identifiers."""
    out = _BACKTICKS.sub(" ", _FENCE.sub(" ", text))
    return _IDENTIFIER.sub(" ", prose(out))


_LATIN_WORD = re.compile(r"[A-Za-z]{2,}", re.ASCII)


def is_chinese(text: str) -> bool:
    """The writer writes Chinese: their own words (``language``) have more Chinese characters than
    English words (a Chinese report names models and flags in English; a Chinese word is about
    two characters)."""
    words = language(text)
    if words.isascii():  # then no Chinese, and the costly Chinese character class is never compiled
        return False
    return len(re.findall(r"[\u3400-\u9fff]", words)) > 2 * len(_LATIN_WORD.findall(words))


def _template_line(line: str) -> bool:
    if _CHECKBOX.match(line):
        return True
    heading = _HEADING_MARKS.sub("", line).lower().replace("？", "?")
    if heading and all(part.strip() in TEMPLATE_HEADINGS for part in heading.split("/")):  # "System Info / 系統信息"
        return True
    env = _ENV_LINE.match(line)
    if not env:
        return False
    key, value = env.group("key").strip().lower(), line[env.end():].strip()
    return bool(_ENV_KEYS.search(key) or (_PACKAGE_VERSION.match(value) and not _METRIC.search(key)))


# A pasted launch script's settings say nothing about what went wrong: the Hydra overrides of verl / OpenRLHF
# (`actor_rollout_ref.rollout.gpu_memory_utilization=0.6`, `trainer.n_gpus_per_node=8`) and, on
# a command's lines (one the shell continues with a backslash, the line that ends it, one that
# starts by setting the environment: `NPROC_PER_NODE=2 swift rlhf ...`, `export NNODES=1`),
# every `key=value`. Their keys ("node", "gpus", "save", "rollout", "memory") would be shared
# with whichever causes' descriptions quote such scripts (a collective timeout, a rollout
# engine's memory), whatever the report is about. A keyword argument in code (`precision=16`),
# a setting named in a sentence ("fixed by setting NCCL_P2P_LEVEL=NVL") and a metric's reading
# (`reward=0`) stay.
_DOTTED_ASSIGNMENT = re.compile(r"(?<![\w./\[-])(?P<key>[A-Za-z_][\w\[\]/-]{0,80}(?:\.[\w\[\]/-]{1,80}){1,12})"
                                r"=(?!=)(?P<value>\S{0,300})")
_ASSIGNMENT = re.compile(r"(?<![\w./\[-])(?P<key>[A-Za-z_][\w.\[\]/-]{0,150})=(?!=)(?P<value>\S{0,300})")
_CONTINUED = re.compile(r"\\[ \t]{0,8}$")   # a shell line ending in a backslash: the command goes on
_SETS_ENVIRONMENT = re.compile(r"^[ \t>$]{0,12}(?:export[ \t]{1,4})?[A-Z][A-Z0-9_]{1,80}=")
_METRIC_KEY = re.compile(r"(?:[\w/]{0,60}[_/])?(?:loss|losses|rewards?|kl|grad_norm|entropy|acc|accuracy|score)",
                         re.IGNORECASE)
_READING = re.compile(r"[\x27\"]?(?:[-+]?\d|nan|inf|-inf|none|null)", re.IGNORECASE)  # a measured value, not a switch


def without_settings(text: str) -> str:
    """``text`` without the settings a pasted launch script assigns (a metric's reading stays)."""
    def drop(match: re.Match) -> str:
        key = match.group("key").rsplit(".", 1)[-1]
        reading = _METRIC_KEY.fullmatch(key) and _READING.match(match.group("value"))
        return match.group(0) if reading else " "
    lines, continued = [], False
    for line in text.split("\n"):
        command = continued or _CONTINUED.search(line) or _SETS_ENVIRONMENT.match(line)
        lines.append(_ASSIGNMENT.sub(drop, line) if command else line)
        continued = bool(_CONTINUED.search(line))
    return _DOTTED_ASSIGNMENT.sub(drop, "\n".join(lines))
