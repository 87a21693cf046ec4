"""Special token ids and vocabulary sizes of a checkpoint folder, read from its JSON files only.

The one reader of tokenizer files: the config probe and the data probes both read through here.

Nothing here runs code from the checkpoint: config.json, generation_config.json,
tokenizer_config.json, special_tokens_map.json and tokenizer.json are parsed as plain JSON, and a
token string (``"</s>"``) is turned into its id through the tokenizer's own tables. Only
``load_tokenizer`` builds a real tokenizer, lazily and with ``local_files_only=True``, for the
probes that tokenise text.

Why per source file: generation stacks read different files (vLLM once read only the tokenizer's
eos, HF ``generate`` reads generation_config.json, falling back to config.json), so an EOS id that
one file names and another does not is how a model ends up never stopping. ``special_token_ids``
therefore keeps each file's view apart::

    >>> special_token_ids("ckpt/")
    {"config.json": {"eos_token_id": 128001, "bos_token_id": 128000, "pad_token_id": None},
     "generation_config.json": {"eos_token_id": [128001, 128009], ...},
     "tokenizer_config.json": {"eos_token_id": 128001, "pad_token_id": None, ...},
     "chat_template": {"eos_token_id": [128009]}}      # end-of-turn markers the template uses
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ArtifactError
from ..files import read_json
from .tensors import safetensors_header

ROLES = ("eos", "bos", "pad")
# End-of-turn markers that chat templates emit after every assistant turn; if one of them ends
# the training samples, generation must stop on it too.
END_OF_TURN = ("<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>", "<|eot|>", "<|end_of_turn|>")
# Names of the input-embedding matrix in common architectures (rows = usable token ids).
EMBEDDING_SUFFIXES = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight",
                      "embed_in.weight", "tok_embeddings.weight", "shared.weight")
MAX_JSON_BYTES = 64 * 1024 * 1024  # tokenizer.json of large-vocab models is ~10-20 MB


def _read_json(path: Path) -> dict | None:
    """A JSON object from a small file, or None when absent, too large or malformed."""
    try:
        data = read_json(path, MAX_JSON_BYTES)
    except ArtifactError:
        return None
    return data if isinstance(data, dict) else None


def _token_string(value: Any) -> str | None:
    """tokenizer_config stores a token as "</s>" or as {"content": "</s>", "__type": "AddedToken"}."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _as_ids(value: Any) -> int | list[int] | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    return None


class _Vocab:
    """token string -> id from the tokenizer's tables, parsed only when first needed."""

    def __init__(self, folder: Path, tokenizer_config: dict | None) -> None:
        self.folder = folder
        self.table: dict[str, int] = {}
        for key, entry in ((tokenizer_config or {}).get("added_tokens_decoder") or {}).items():
            content = _token_string(entry)
            if content is not None and str(key).isdigit():
                self.table[content] = int(key)
        self._full: dict[str, int] | None = None
        self.size: int | None = None  # len(tokenizer): base vocab + added tokens

    def _load_full(self) -> dict[str, int]:
        if self._full is not None:
            return self._full
        table: dict[str, int] = {}
        tok = _read_json(self.folder / "tokenizer.json")
        if tok:
            vocab = (tok.get("model") or {}).get("vocab")
            if isinstance(vocab, dict):                      # BPE, WordLevel, WordPiece
                table.update({k: v for k, v in vocab.items() if isinstance(v, int)})
            elif isinstance(vocab, list):                    # Unigram: [[piece, score], ...]
                table.update({p[0]: i for i, p in enumerate(vocab) if isinstance(p, list) and p})
            for added in tok.get("added_tokens") or []:
                if isinstance(added, dict) and isinstance(added.get("id"), int):
                    table[str(added.get("content"))] = added["id"]
        else:
            vocab = _read_json(self.folder / "vocab.json")  # slow GPT-2 style tokenizers
            if vocab:
                table.update({k: v for k, v in vocab.items() if isinstance(v, int)})
        if table:  # added tokens extend a base vocabulary; alone they do not tell its size
            added = _read_json(self.folder / "added_tokens.json") or {}
            table.update({k: v for k, v in added.items() if isinstance(v, int)})
            table.update(self.table)
            self.size = max(len(set(table.values())), max(table.values()) + 1)
        self._full = table
        return table

    def id_of(self, token: str) -> int | None:
        if token in self.table:
            return self.table[token]
        return self._load_full().get(token)


@dataclass(frozen=True)
class Declared:
    """What one file says a special token is. ``value`` is the id (or list of ids) as written, or
    as resolved from the token string ``text``; None when the tokenizer's tables lack that string."""

    source: str                 # config.json, generation_config.json, tokenizer_config.json, chat_template ...
    role: str                   # eos | bos | pad
    value: int | list[int] | None
    text: str | None = None

    @property
    def ids(self) -> list[int]:
        return [] if self.value is None else [self.value] if isinstance(self.value, int) else list(self.value)


def config_declared(source: str, data: dict | None) -> list[Declared]:
    """The ``*_token_id`` entries of a config dict (config.json, generation_config.json, Megatron args);
    a multimodal config's ``text_config`` fills what the top level leaves out."""
    data = data or {}
    if isinstance(data.get("text_config"), dict):
        data = {**data["text_config"], **{k: v for k, v in data.items() if k.endswith("_token_id")}}
    return [Declared(source, role, _as_ids(data[f"{role}_token_id"])) for role in ROLES if f"{role}_token_id" in data]


def tokenizer_declared(folder: str | Path) -> list[Declared]:
    """Special tokens as the tokenizer files of ``folder`` name them, resolved to ids through the
    tokenizer's own tables, and the end-of-turn markers its chat template emits (one EOS entry of
    source ``chat_template``)."""
    folder = Path(folder)
    tok_config = _read_json(folder / "tokenizer_config.json")
    vocab = _Vocab(folder, tok_config)
    out = []
    for name, data in (("tokenizer_config.json", tok_config),
                       ("special_tokens_map.json", _read_json(folder / "special_tokens_map.json"))):
        for role in ROLES:
            if f"{role}_token" in (data or {}):
                token = _token_string(data[f"{role}_token"])
                out.append(Declared(name, role, vocab.id_of(token) if token is not None else None, token))
    template = chat_template(folder, tok_config)
    markers = [m for m in END_OF_TURN if m in template] if template else []
    ids = [i for i in (vocab.id_of(m) for m in markers) if i is not None]
    if ids:
        out.append(Declared("chat_template", "eos", ids, ", ".join(markers)))
    return out


def special_token_ids(folder: str | Path) -> dict[str, dict[str, int | list[int] | None]]:
    """EOS / BOS / pad ids as each file of ``folder`` states them, keyed by file name.

    Files that are missing or say nothing about special tokens are left out. A token string that
    cannot be resolved to an id gives None. ``"chat_template"`` lists the end-of-turn markers the
    template in tokenizer_config.json uses (e.g. ``<|eot_id|>``) as extra EOS ids.
    """
    folder = Path(folder)
    declared = [d for name in ("config.json", "generation_config.json")
                for d in config_declared(name, _read_json(folder / name))] + tokenizer_declared(folder)
    out: dict[str, dict[str, int | list[int] | None]] = {}
    for d in declared:
        out.setdefault(d.source, {})[f"{d.role}_token_id"] = d.value
    return out


def eos_not_stopped(eos: dict[str, list[int]]) -> tuple[list[int], list[int] | None]:
    """(EOS ids some source names that generation does not stop on, the ids it stops on).

    Generation stops on generation_config.json's eos_token_id, else config.json's; with neither,
    every disagreement between sources is a gap (nothing says which one generation uses)."""
    union = {i for ids in eos.values() for i in ids}
    stops = eos.get("generation_config.json") or eos.get("config.json")
    if stops:
        return sorted(union - set(stops)), sorted(stops)
    differ = len({tuple(sorted(v)) for v in eos.values()}) > 1
    return (sorted(union) if differ else []), None


def chat_template(folder: Path, tok_config: dict | None = None) -> str:
    """The chat template text: tokenizer_config.json (transformers 4) or chat_template.jinja /
    chat_template.json (transformers >= 4.43 saves it beside); "" when there is none."""
    template = (tok_config if tok_config is not None else _read_json(folder / "tokenizer_config.json") or {}
                ).get("chat_template")
    if not template:
        template = (_read_json(folder / "chat_template.json") or {}).get("chat_template")
    if not template and (folder / "chat_template.jinja").is_file():
        try:
            template = (folder / "chat_template.jinja").read_text(encoding="utf-8")[:MAX_JSON_BYTES]
        except (OSError, UnicodeDecodeError):
            template = ""
    if isinstance(template, list):  # [{"name": "default", "template": "..."}, ...]
        template = " ".join(t.get("template", "") for t in template if isinstance(t, dict))
    return template if isinstance(template, str) else ""


def added_tokens(folder: str | Path) -> dict[int, tuple[str, bool]]:
    """id -> (content, special) of the tokens added on top of the base vocabulary (tokenizer.json
    ``added_tokens``, tokenizer_config.json ``added_tokens_decoder``): chat markers, reserved and
    user-added tokens. Their embedding rows are the ones a base model may never have trained."""
    folder = Path(folder)
    out: dict[int, tuple[str, bool]] = {}
    for entry in (_read_json(folder / "tokenizer.json") or {}).get("added_tokens") or []:
        if isinstance(entry, dict) and isinstance(entry.get("id"), int) and isinstance(entry.get("content"), str):
            out[entry["id"]] = (entry["content"], bool(entry.get("special")))
    decoder = (_read_json(folder / "tokenizer_config.json") or {}).get("added_tokens_decoder") or {}
    for key, entry in decoder.items() if isinstance(decoder, dict) else ():
        if str(key).isdigit() and isinstance(entry, dict) and isinstance(entry.get("content"), str):
            out.setdefault(int(key), (entry["content"], bool(entry.get("special"))))
    return out


def embedding_rows(folder: str | Path) -> int | None:
    """Rows of the input embedding, from safetensors headers only (no tensor data is read)."""
    folder = Path(folder)
    files: list[Path] = []
    index = _read_json(folder / "model.safetensors.index.json")
    if index and isinstance(index.get("weight_map"), dict):
        for name, shard in index["weight_map"].items():
            if name.endswith(EMBEDDING_SUFFIXES):
                files.append(folder / str(shard))
                break
    files += sorted(folder.glob("*.safetensors"))
    for path in files[:8]:
        try:
            header = safetensors_header(path)
        except Exception:  # a broken shard is the weights probe's business, not ours
            continue
        for name in sorted(header, key=len):
            entry = header[name]
            if name.endswith(EMBEDDING_SUFFIXES) and isinstance(entry, dict) and entry.get("shape"):
                return int(entry["shape"][0])
    return None


def vocab_sizes(folder: str | Path, tokenizer: bool = True) -> dict[str, int]:
    """Every vocabulary size the folder states: config vocab_size, tokenizer length (parses
    tokenizer.json, ~10 MB for large vocabularies; skipped with ``tokenizer=False``), embedding rows."""
    folder = Path(folder)
    out: dict[str, int] = {}
    config = _read_json(folder / "config.json") or {}
    size = config.get("vocab_size", (config.get("text_config") or {}).get("vocab_size"))
    if isinstance(size, int) and size > 0:
        out["config.json"] = size
    if tokenizer:
        vocab = _Vocab(folder, _read_json(folder / "tokenizer_config.json"))
        vocab._load_full()
        if vocab.size:
            out["tokenizer"] = vocab.size
    rows = embedding_rows(folder)
    if rows:
        out["embedding"] = rows
    return out


@dataclass
class Specials:
    """What the data probes need from a checkpoint folder, merged over its files.

    ``eos`` keeps every source's EOS ids apart (for the mismatch check); ``eos_ids`` is their union
    (a sample "has EOS" when it holds any of them). ``vocab`` is the hard limit for token ids:
    embedding rows when the weights say so, else config vocab_size.
    """

    folder: str = ""
    eos: dict[str, list[int]] = field(default_factory=dict)
    pad: int | None = None
    pad_source: str = ""
    bos: int | None = None
    vocab: int | None = None
    vocab_source: str = ""

    @property
    def eos_ids(self) -> set[int]:
        return {i for ids in self.eos.values() for i in ids}

    def add_eos(self, source: str, value: Any) -> None:
        ids = _as_ids(value)
        if ids is not None:
            self.eos[source] = [ids] if isinstance(ids, int) else ids


def specials(folder: str | Path) -> Specials:
    """Merge ``special_token_ids`` and ``vocab_sizes`` of ``folder`` into one ``Specials``."""
    folder = Path(folder)
    out = Specials(folder=str(folder))
    by_file = special_token_ids(folder)
    # pad/bos: the tokenizer decides what the collator writes, so it wins over config.json.
    order = ("tokenizer_config.json", "special_tokens_map.json", "config.json", "generation_config.json")
    for name in order:
        ids = by_file.get(name, {})
        if out.pad is None and isinstance(ids.get("pad_token_id"), int):
            out.pad, out.pad_source = ids["pad_token_id"], name
        if out.bos is None and isinstance(ids.get("bos_token_id"), int):
            out.bos = ids["bos_token_id"]
    for name, ids in by_file.items():
        out.add_eos(name, ids.get("eos_token_id"))
    sizes = vocab_sizes(folder, tokenizer=False)
    for source in ("embedding", "config.json"):
        if source in sizes:
            out.vocab, out.vocab_source = sizes[source], source
            break
    return out


def load_tokenizer(folder: str | Path) -> tuple[Any | None, str]:
    """``(tokenizer, "")`` via AutoTokenizer from local files only, or ``(None, why not)``."""
    folder = Path(folder)
    if not any((folder / n).is_file() for n in ("tokenizer.json", "tokenizer.model", "vocab.json")):
        return None, f"no tokenizer files in {folder}"
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return None, "transformers is not installed (pip install 'llmfix[models]')"
    try:
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True,
                                             trust_remote_code=False), ""
    except Exception as err:  # any failure just means: no tokenised checks
        first = (str(err).strip().splitlines() or [err.__class__.__name__])[0]
        return None, f"tokenizer in {folder} could not be loaded: {first[:160]}"


# --- chat templates: rendered only within a budget -----------------------------------------------

MAX_TEMPLATE_CHARS = 1 << 20     # characters one rendered conversation may have
MAX_TEMPLATE_SECONDS = 2.0       # wall time of one render
MAX_TEMPLATE_EXPONENT = 256      # ``a ** b`` with b above this is refused


def template_over_budget(template: str, messages: list, variables: dict) -> str | None:
    """Why rendering ``template`` on ``messages`` breaks the budget above ("'x' * 10**10"), or None.

    A tokenizer_config.json is user input: its chat template is Jinja, which transformers renders
    in a sandbox that stops attribute tricks but not size or time. This renders it first in the
    same kind of sandbox with the operators that grow values checked, the output counted as it is
    produced, and a timer; transformers renders it only when this passes. Ordinary template errors
    are not our business here (None): transformers reports them itself.
    """
    for text in _template_texts(template):
        if len(text) > MAX_TEMPLATE_CHARS:  # compiling 10 MB of Jinja alone takes longer than the timer allows
            return f"is over {MAX_TEMPLATE_CHARS:,} characters long"
        why = _render_over_budget(text, messages, variables)
        if why:
            return why
    return None


def _template_texts(template) -> list[str]:
    """The template strings transformers may render: one, or each of named templates (a list of
    {"name", "template"} in tokenizer_config.json, a dict once the tokenizer is loaded)."""
    if isinstance(template, dict):
        return [t for t in template.values() if isinstance(t, str)]
    if isinstance(template, list):
        return [t.get("template") for t in template if isinstance(t, dict) and isinstance(t.get("template"), str)]
    return [template] if isinstance(template, str) else []


def _render_over_budget(template: str, messages: list, variables: dict) -> str | None:
    import signal
    import threading

    env = _budget_environment_class()(trim_blocks=True, lstrip_blocks=True)
    env.globals.update(raise_exception=_raise, strftime_now=lambda fmt: "")
    timed = threading.current_thread() is threading.main_thread()
    if timed:
        old = signal.signal(signal.SIGALRM, _timeout)
        signal.setitimer(signal.ITIMER_REAL, MAX_TEMPLATE_SECONDS)
    try:
        size = 0
        for piece in env.from_string(template).generate(messages=messages, **variables):
            size += len(piece)
            if size > MAX_TEMPLATE_CHARS:
                return f"renders over {MAX_TEMPLATE_CHARS:,} characters for one conversation"
    except _OverBudget as err:
        return str(err)
    except Exception:  # noqa: BLE001 - a broken template is reported by transformers itself
        return None
    finally:
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    return None


class _OverBudget(Exception):
    pass


def _timeout(*_):
    raise _OverBudget(f"takes over {MAX_TEMPLATE_SECONDS:g} s to render one conversation")


def _raise(message):
    raise ValueError(message)


MAX_TEMPLATE_GROWTH = 16 * MAX_TEMPLATE_CHARS  # a filter or method call's size times its widest argument
_WIDE_FORMAT = re.compile(r"\d{7,}")           # a format width of a million or more: '{:>2000000000}'


def _grows_too_much(value, args) -> bool:
    """A filter or string method that would build a value out of all proportion to the budget:
    ``center(2000000000)``, ``indent(100000)`` on 100,000 lines, ``replace('x', 'x' * 100000)``.
    Checked before the call: one C-level call cannot be interrupted by the timer."""
    size = len(value) if isinstance(value, (str, list, tuple, dict)) else 1
    widths = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    widths += [len(a) for a in args if isinstance(a, (str, list, tuple))]
    return size * max([1, *widths]) > MAX_TEMPLATE_GROWTH or any(
        isinstance(a, str) and _WIDE_FORMAT.search(a) for a in (value, *args))


def _bounded_filter(f):
    """``f`` refusing arguments that would grow its result past the budget."""
    skip = 1 if hasattr(f, "jinja_pass_arg") else 0  # context / environment come first

    @functools.wraps(f)
    def run(*args, **kwargs):
        if len(args) > skip and _grows_too_much(args[skip], [*args[skip + 1:], *kwargs.values()]):
            raise _OverBudget("calls a filter that builds a value too large to hold")
        return f(*args, **kwargs)
    return run


def _budget_environment_class():
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BudgetEnvironment(ImmutableSandboxedEnvironment):
        """The sandbox with ``*``, ``**``, ``%``, filters and string methods refusing results
        beyond the budget."""

        intercepted_binops = frozenset(("*", "**", "%"))

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.filters = {name: _bounded_filter(f) for name, f in self.filters.items()}

        def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 - jinja2's own signature
            owner = getattr(__obj, "__self__", None)
            if isinstance(owner, (str, list, tuple)) and _grows_too_much(owner, [*args, *kwargs.values()]):
                raise _OverBudget("calls a method that builds a value too large to hold")
            return super().call(__context, __obj, *args, **kwargs)

        def wrap_str_format(self, value):
            owner = getattr(value, "__self__", None)  # '{:>2000000000}'.format(1)
            if getattr(value, "__name__", "") in ("format", "format_map") and isinstance(owner, str) \
                    and _WIDE_FORMAT.search(owner):
                raise _OverBudget("formats with a width too large to hold")
            return super().wrap_str_format(value)

        def call_binop(self, context, operator, left, right):
            if operator == "**" and isinstance(right, (int, float)) and (
                    abs(right) > MAX_TEMPLATE_EXPONENT
                    or isinstance(left, int) and left.bit_length() * abs(right) > MAX_TEMPLATE_CHARS):
                raise _OverBudget("computes a power too large to hold")
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_TEMPLATE_CHARS:
                        raise _OverBudget(f"builds a value of {len(seq) * n:,} items")
            if operator == "%" and isinstance(left, str) and _WIDE_FORMAT.search(left):
                raise _OverBudget("formats with a width too large to hold")
            return super().call_binop(context, operator, left, right)

    return BudgetEnvironment
