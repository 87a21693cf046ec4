"""Read tensors from safetensors and torch pickles without running any code from the file.

Torch zip files whose pickle holds only tensors, containers and numbers are read lazily
(``torchzip.load_lazy``: each tensor a ``StoredTensor`` read when a probe asks for it); everything
else goes through ``torch.load(weights_only=True, mmap=True)``, and a file that needs arbitrary
objects is refused with UnsafePickleError and nothing in it runs. Tensors are read one at a time,
small ones into a fresh buffer and large ones through their own private read-only memory map
released as soon as the tensor is dropped: a long-lived map of the whole file would keep every
page it ever touched resident, so peak RSS would grow to the shard size instead of the largest
tensor (bench/bench_weights.py measures this).
"""
from __future__ import annotations

import itertools
import math
import mmap
import pickle
import re
import struct
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ArtifactError, UnsafePickleError
from ..files import open_regular, parse_json, regular_file
from .torchzip import Unsupported, as_tensor, is_tensor, load_lazy, read_span

PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
NESTED_KEYS = ("state_dict", "model", "module", "model_state_dict")
# Keys of training-state wrappers that never hold model weights (Megatron, DeepSpeed, Lightning).
NOT_WEIGHTS = ("optimizer", "optimizer_states", "optimizer_state_dict", "lr_scheduler", "lr_schedulers",
               "opt_param_scheduler", "rng_state", "rng_tracker_states", "args", "param_shapes",
               "frozen_param_shapes", "buffer_names", "ds_config", "loops", "callbacks")

# safetensors dtype tag -> torch dtype name (those torch can hold on CPU)
ST_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
             "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
             "BOOL": "bool", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
             "U16": "uint16", "U32": "uint32", "U64": "uint64"}
# bytes per element of each tag (the header's byte ranges must match the shapes)
ST_ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
               "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8}


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor lives in a safetensors file, read from the header alone."""

    name: str
    dtype: str          # safetensors tag: F32, BF16, ...
    shape: tuple[int, ...]
    start: int          # absolute byte offset in the file
    nbytes: int


def safetensors_header(path: Path) -> dict[str, Any]:
    """Parse the JSON header of a .safetensors file (tensor names, dtypes, shapes, offsets)."""
    return _read_header(Path(path))[0]


def _read_header(path: Path) -> tuple[dict[str, Any], int]:
    """(header, byte offset where tensor data starts); clear ArtifactErrors for broken files."""
    size = regular_file(path).st_size
    try:
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) < 8:
                raise ArtifactError(path, "truncated safetensors file (no header length)")
            (n,) = struct.unpack("<Q", raw)
            if n > size - 8 or n > 100_000_000:
                raise ArtifactError(path, f"corrupt safetensors header (claims {n} bytes, file has {size})")
            header = parse_json(f.read(n), path)
    except ArtifactError as err:
        raise ArtifactError(path, f"corrupt safetensors header ({err.problem})") from None
    except OSError as err:
        raise ArtifactError(path, f"cannot open: {err.strerror or err}") from None
    if not isinstance(header, dict):
        raise ArtifactError(path, "corrupt safetensors header (not a JSON object)")
    return header, 8 + n


def _entry(path: Path, name: str, v: Any, base: int, size: int) -> TensorInfo:
    """One header entry checked the way the safetensors library checks it: offsets two
    non-negative integers in order, shape non-negative integers whose size matches the bytes, and
    the data inside the file (so header bytes are never read as weights)."""
    def bad(why: str) -> ArtifactError:
        return ArtifactError(path, f"corrupt safetensors header: tensor {str(name)[:60]!r} {why}")

    if not isinstance(v, dict):
        raise bad("is not an object")
    offsets, shape, dtype = v.get("data_offsets"), v.get("shape"), v.get("dtype")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(x) is int for x in offsets)
            and 0 <= offsets[0] <= offsets[1]):
        raise bad(f"has bad data_offsets {str(offsets)[:40]}")
    if not (isinstance(shape, list) and all(type(x) is int and x >= 0 for x in shape)):
        raise bad(f"has bad shape {str(shape)[:40]}")
    if not isinstance(dtype, str):
        raise bad("has no dtype")
    a, b = offsets
    if base + b > size:
        raise ArtifactError(path, f"truncated safetensors file: data ends at byte {base + b}, file has {size}")
    item = ST_ITEMSIZE.get(dtype)
    if item is not None and math.prod(shape) * item != b - a:
        raise bad(f"has {b - a} bytes for shape {shape} of {dtype}")
    return TensorInfo(name, dtype, tuple(shape), base + a, b - a)


def list_safetensors(path: Path) -> list[TensorInfo]:
    """Every tensor of a safetensors file with dtype, shape and byte range, without reading data;
    ArtifactError for any malformed or overlapping entry."""
    path = Path(path)
    header, base = _read_header(path)
    size = path.stat().st_size
    out = sorted((_entry(path, name, v, base, size) for name, v in header.items() if name != "__metadata__"),
                 key=lambda t: t.start)  # file order: sequential reads
    for prev, cur in itertools.pairwise(out):
        if cur.start < prev.start + prev.nbytes:
            raise ArtifactError(path, f"corrupt safetensors header: tensors {str(prev.name)[:40]!r} and "
                                      f"{str(cur.name)[:40]!r} overlap")
    return out


def read_safetensor(f, info: TensorInfo, path: Path | str = "") -> Any:
    """One tensor from an open file (``read_span``: a copy when small, else its own copy-on-write
    map that lives as long as the tensor); the file is never written."""
    import torch

    dtype = getattr(torch, ST_DTYPES.get(info.dtype, ""), None)
    if dtype is None:
        raise ArtifactError(path, f"tensor {info.name}: dtype {info.dtype} not supported by this torch")
    return read_span(f, info.start, info.nbytes, dtype, path).reshape(info.shape)


def iter_safetensors(path: Path) -> Iterator[tuple[str, Any]]:
    """Yield (name, tensor) one at a time from a safetensors file, in file order."""
    path = Path(path)
    infos = list_safetensors(path)
    try:
        with open(path, "rb") as f:
            for info in infos:
                yield info.name, read_safetensor(f, info, path)
    except (OSError, ValueError, RuntimeError) as err:
        raise ArtifactError(path, f"cannot read safetensors: {err}") from None


def _refusal(err: Exception) -> str:
    """The one useful line of torch's weights_only refusal: which global it would have imported."""
    text = str(err)
    m = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text) or re.search(r"GLOBAL ([\w.]+)", text)
    if m:
        return f"it needs {m.group(1)}"
    m = re.search(r"WeightsUnpickler error: ([^\n]+)", text)
    return m.group(1)[:160] if m else text.strip().splitlines()[0][:160] if text.strip() else ""


# The last torch file loaded, kept so that the sniffer and the probes unpickle it once: always
# when read lazily (the object holds no tensor data), else when it is at most KEEP_PICKLE_BYTES.
_LAST_PICKLE: dict[tuple, Any] = {}
KEEP_PICKLE_BYTES = 256 << 20


def load_pickle(path: Path, allow_namespace: bool = False) -> Any:
    """The object in a torch file, its tensors ``StoredTensor`` records when read lazily (use
    ``is_tensor`` / ``as_tensor``); once per (path, size, mtime, allow_namespace)."""
    st = regular_file(path)
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns, allow_namespace)
    if key not in _LAST_PICKLE:
        obj, lazy = _load_pickle(Path(path), allow_namespace)
        _LAST_PICKLE.clear()
        if not lazy and st.st_size > KEEP_PICKLE_BYTES:
            return obj
        _LAST_PICKLE[key] = obj
    return _LAST_PICKLE[key]


def _load_pickle(path: Path, allow_namespace: bool = False) -> tuple[Any, bool]:
    """(object, read lazily?): ``load_lazy`` for a plain tensor pickle in torch's zip format, else
    torch.load with weights_only=True (and mmap when the file allows it); refuse anything else.

    ``allow_namespace`` lets ``argparse.Namespace`` through (Megatron stores its command line
    that way): it is a plain attribute bag whose reconstruction runs no code from the file.
    """
    import torch

    path = Path(path)
    allowed = []
    if allow_namespace:
        import argparse
        allowed.append(argparse.Namespace)
    with open_regular(path) as f:  # unreadable: one line, before torch sees the path
        first = f.read(1)
    mmap_ok = zipfile.is_zipfile(path)  # mmap needs the zip-based format of torch >= 1.6
    if not mmap_ok and first != b"\x80":  # pickles of protocol 2+ (every torch.save before zip) start with PROTO
        raise ArtifactError(path, "cannot read torch file: not a torch file (neither torch's zip format nor a pickle)")
    if mmap_ok:
        try:
            return load_lazy(path, allow_namespace), True
        except Unsupported:
            pass
    try:
        with torch.serialization.safe_globals(allowed), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(str(path), map_location="cpu", weights_only=True, mmap=mmap_ok), False
    except pickle.UnpicklingError as err:
        if "GLOBAL" not in str(err) and not mmap_ok and not _imports_code(path):  # bytes, no real pickle
            raise ArtifactError(path, "cannot read torch file: not a torch file, the pickle is malformed "
                                      f"({_refusal(err)})") from None
        raise UnsafePickleError(
            path, "refused: this pickle needs arbitrary code to load (weights_only=True); "
                  f"nothing in it was run ({_refusal(err)})") from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile, struct.error) as err:
        first = str(err).strip().splitlines()[0][:200] if str(err).strip() else err.__class__.__name__
        raise ArtifactError(path, f"cannot read torch file: {first}") from None
    except (KeyError, IndexError, TypeError, AttributeError, RecursionError, MemoryError) as err:
        # torch's weights-only unpickler on bytes that are no pickle at all
        raise ArtifactError(path, "cannot read torch file: not a torch file, the pickle is malformed "
                                  f"({type(err).__name__})") from None


def _imports_code(path: Path, max_ops: int = 1_000_000) -> bool:
    """Whether a pickle the weights-only unpickler refused holds an import or a call (then it is
    refused as unsafe), rather than being bytes that no pickle parser reads. Opcodes are only
    listed by ``pickletools``, never executed."""
    import pickletools

    code_ops = {"GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "NEWOBJ", "NEWOBJ_EX"}
    try:
        with open(path, "rb") as f:
            for i, (op, _, _) in enumerate(pickletools.genops(f)):
                if op.name in code_ops:
                    return True
                if i >= max_ops:
                    return True  # a long, well-formed pickle: treat it as the refusal said
    except Exception:  # noqa: BLE001 - any parse failure means the bytes are no pickle
        return False
    return False


def is_optimizer_state(obj: Any) -> bool:
    """A torch optimizer state_dict ({'state': ..., 'param_groups': [...]})."""
    return isinstance(obj, dict) and isinstance(obj.get("param_groups"), list) and "state" in obj


def _flatten(obj: dict, prefix: str, out: dict, depth: int) -> None:
    for key, value in obj.items():
        if not isinstance(key, str):
            continue
        name = f"{prefix}{key}"
        if is_tensor(value):
            out[name] = value
        elif isinstance(value, dict) and depth < 6 and key not in NOT_WEIGHTS and not is_optimizer_state(value):
            _flatten(value, name + ".", out, depth + 1)


def unwrap_state_dict(obj: Any) -> dict[str, Any] | None:
    """Find the tensor dict inside common wrappers ({'model': ..., 'module': ...}), else None.

    Nested module dicts (Megatron's ``language_model.embedding.word_embeddings.weight``) are
    flattened to dotted names; optimizer states and training-state entries are left out. Values
    may be ``StoredTensor`` records not read yet.
    """
    for _ in range(4):
        if not isinstance(obj, dict) or is_optimizer_state(obj):
            return None
        if obj and all(is_tensor(v) for v in obj.values()):
            return obj if all(isinstance(k, str) for k in obj) else {str(k): v for k, v in obj.items()}
        inner = next((obj[k] for k in NESTED_KEYS if isinstance(obj.get(k), dict)), None)
        if inner is None:
            break
        obj = inner
    flat: dict[str, Any] = {}
    _flatten(obj, "", flat, 0)
    return flat or None


def file_maps(path: Path) -> list[tuple[int, int]]:
    """Address ranges of this process that map ``path`` (Linux /proc/self/maps; else empty)."""
    try:
        target = str(Path(path).resolve())
        out = []
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and parts[5].strip() == target:
                    a, b = parts[0].split("-")
                    out.append((int(a, 16), int(b, 16)))
        return out
    except OSError:
        return []


def release(tensor: Any, maps: list[tuple[int, int]]) -> None:
    """Drop the pages of a memory-mapped pickle tensor from this process (Linux, best effort).

    ``torch.load(mmap=True)`` maps the whole file once; pages touched stay resident until the
    map goes, so streaming a large .bin would otherwise grow RSS to the file size. Only pages
    inside ``maps`` (the file's own private, never-written mappings, from ``file_maps``) are
    dropped: the kernel re-reads them from the file if touched again, whereas dropping heap
    memory would zero it.
    """
    if not maps:
        return
    try:
        import ctypes

        storage = tensor.untyped_storage()
        ptr, size = storage.data_ptr(), storage.nbytes()
        if size < 1 << 20 or not any(a <= ptr and ptr + size <= b for a, b in maps):
            return
        page = mmap.PAGESIZE
        start = (ptr + page - 1) // page * page  # only whole pages inside this storage
        end = (ptr + size) // page * page
        if end > start:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), 4)  # MADV_DONTNEED
    except Exception:  # noqa: BLE001 - an optimisation only
        pass


def iter_tensors(path: Path, allow_namespace: bool = False) -> Iterator[tuple[str, Any]]:
    """Yield (name, tensor) from a .safetensors file or a weights-only torch pickle."""
    path = Path(path)
    if path.suffix == ".safetensors":
        yield from iter_safetensors(path)
        return
    state = unwrap_state_dict(load_pickle(path, allow_namespace=allow_namespace))
    if state is None:
        raise ArtifactError(path, "holds no tensors (expected a state dict)")
    for name, value in state.items():
        yield name, as_tensor(value)
