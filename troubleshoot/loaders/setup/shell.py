"""Launch commands and shell scripts: ``torchrun``, ``deepspeed``, ``accelerate launch``,
``python train.py --...``, ``llamafactory-cli train``, Megatron ``pretrain_gpt.py`` arguments.

Read with ``shlex`` (never run): continuation lines are joined, ``NAME=value`` and
``NAME=( ... )`` assignments are remembered and ``$NAME`` / ``${NAME}`` / ``${NAME[@]}`` expanded
where used (Megatron scripts keep their arguments in ``GPT_ARGS="--num-layers 24 ..."``), and
every ``--flag value``, ``--flag=value``, bare ``--switch`` and ``key=value`` override becomes a
Setting named like the flag (``--clip-grad 1.0`` -> ``clip_grad``).
"""
from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

from .read import Setting, read_text, shebang, snake

LAUNCHERS = re.compile(r"(?m)^\s*(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:srun\s+\S.*)?"
                       r"(?:torchrun|deepspeed|accelerate\s+launch|python3?\s+(?:-m\s+\S+\s+)?\S+\.py|"
                       r"llamafactory-cli|axolotl|tune\s+run|mlx_lm\.lora|python3?\s+-m\s+(?:torch\.distributed\.run|mlx_lm))")
SHELL_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch", ".zsh")
_ASSIGN = re.compile(r"^\s*(?:export\s+|local\s+|declare\s+(?:-\w\s+)?)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:\[@\]|\[\*\])?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_OVERRIDE = re.compile(r"^([a-z][a-z0-9_.]*)=(.+)$")
_NUMBER = re.compile(r"^-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")


def is_launch(path: Path, head: str) -> bool:
    return path.suffix.lower() in SHELL_SUFFIXES or "sh" in shebang(head) \
        or bool(LAUNCHERS.search(head))


MAX_SHELL_BYTES = 1 << 20  # a launch script is a few KB; shlex reads ~1 MB/s
MAX_SETTINGS = 20_000      # settings kept from one script (as trainer configs' MAX_LEAVES)


def shell_settings(path: Path) -> list[Setting]:
    text = read_text(path, limit=MAX_SHELL_BYTES) or ""
    return command_settings(text)


def command_settings(text: str) -> list[Setting]:
    """Settings from shell text: a script or a pasted command line."""
    variables: dict[str, tuple[list[str], int]] = {}
    expand = _Expander(variables)
    out: list[Setting] = []
    for line_no, line in _logical_lines(text):
        if len(out) >= MAX_SETTINGS:
            break
        assign = _ASSIGN.match(line)
        if assign and not _is_command(assign.group(2)):
            # unquoted $NAME splits on spaces, so a quoted list of flags is still a list of words
            tokens = [word for token in _split(assign.group(2).strip().strip("()")) for word in token.split()]
            variables[assign.group(1)] = (expand(tokens), line_no)
            if any(t.startswith("--") for t in tokens):
                out += _flags(variables[assign.group(1)][0], line_no)
            continue
        words = _split(line)
        while words and _ASSIGN.match(words[0]):  # environment prefix
            words.pop(0)
        out += _flags(expand(words), line_no)
    return out[:MAX_SETTINGS]


def _is_command(value: str) -> bool:
    """``CUDA_VISIBLE_DEVICES=0,1 llamafactory-cli train ...``: an environment prefix, not an assignment."""
    value = value.strip()
    return not value.startswith(("(", '"', "'")) and len(_split(value)) > 1


def _logical_lines(text: str):
    """(first line number, logical line): continuation lines joined, a multi-line array or quoted
    value gathered into its assignment."""
    pending, start, depth = "", 0, 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        pending += line
        depth = _open(pending)
        if depth and number - start < 400:
            pending += " "
            continue
        yield start, pending
        pending = ""
    if pending:
        yield start, pending


def _open(text: str) -> int:
    """Non-zero while an array '(' or a quote is still open (an assignment spanning lines)."""
    if not _ASSIGN.match(text):
        return 0
    value = _ASSIGN.match(text).group(2)
    if value.startswith("(") and ")" not in value:
        return 1
    for quote in ('"', "'"):
        if value.startswith(quote) and value.count(quote) % 2 == 1:
            return 1
    return 0


def _split(text: str) -> list[str]:
    text = _uncommented(text)
    try:
        return shlex.split(text)
    except ValueError:  # unbalanced quotes: fall back to whitespace
        return text.split()


def _uncommented(text: str) -> str:
    """``text`` up to its comment. As in bash, ``#`` opens a comment only at the start of a word and
    outside quotes (shlex cuts at any ``#``): ms-swift's ``--dataset alpaca-gpt4-data-zh#500`` takes
    500 samples, and every flag after it is still part of the command."""
    quote, previous = "", " "
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#" and previous.isspace():
            return text[:i]
        previous = char
    return text


class _Expander:
    """``$NAME`` / ``${NAME}`` / ``${NAME[@]}`` replaced by the words remembered for NAME, within a
    budget for the whole script: ``V2="$V1 $V1"`` repeated 40 times would double to 2**40 words
    (and ``V2="$V1$V1"`` to a 2**40-character word). Past the budget, names stay as written."""

    MAX_CHARS = 4 << 20   # characters all expansions of one script may produce (as much as the file)
    MAX_WORD = 4096       # characters of one expanded word

    def __init__(self, variables: dict[str, tuple[list[str], int]]) -> None:
        self.variables, self.left = variables, self.MAX_CHARS

    def __call__(self, tokens: list[str]) -> list[str]:
        out: list[str] = []
        for token in tokens:
            if self.left <= 0:  # budget spent: the rest as written
                out.append(token)
                continue
            whole = _VAR.fullmatch(token)
            name = whole and (whole.group(1) or whole.group(2))
            for word in self.variables[name][0] if name in self.variables else [self._substituted(token)]:
                out.append(word[:self.MAX_WORD])
                self.left -= len(out[-1]) + 1
                if self.left <= 0:
                    break
        return out

    def _substituted(self, token: str) -> str:
        """``--save=$DIR/ckpt``: each name replaced by its words joined, at most MAX_WORD in all."""
        left = [self.MAX_WORD]

        def value(m: re.Match) -> str:
            words = self.variables.get(m.group(1) or m.group(2), ([m.group(0)], 0))[0]
            text = " ".join(itertools.islice(words, left[0]))[:max(left[0], 0)]
            left[0] -= len(text)
            return text
        return _VAR.sub(value, token)


def _flags(tokens: list[str], line: int) -> list[Setting]:
    out = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("--") and len(token) > 2:
            name, sep, value = token.partition("=")
            if not sep:
                following = tokens[i + 1] if i + 1 < len(tokens) else None
                if following is not None and (not following.startswith("-") or _NUMBER.match(following)):
                    value, i = following, i + 1
                else:
                    value = True
            out.append(Setting(snake(name), value, line, f"{name} {value}".strip() if value is not True else name))
        elif (m := _OVERRIDE.match(token)) and not token.startswith(("http", "/")):
            out.append(Setting(snake(m.group(1)), m.group(2), line, token))
        i += 1
    return out
