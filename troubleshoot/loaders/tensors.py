"""Read tensors from safetensors and torch pickles without running any code from the file.

Everything pickled goes through ``torch.load(weights_only=True, mmap=True)``; a file that needs
arbitrary objects is refused with UnsafePickleError and nothing in it runs. Safetensors files are
read one tensor at a time, each through its own private read-only memory map that is released as
soon as the tensor is dropped: a long-lived map of the whole file would keep every page it ever
touched resident, so peak RSS would grow to the shard size instead of the largest tensor
(bench/bench_weights.py measures this).
"""
from __future__ import annotations

import json
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
    try:
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) < 8:
                raise ArtifactError(path, "truncated safetensors file (no header length)")
            (n,) = struct.unpack("<Q", raw)
            size = path.stat().st_size
            if n > size - 8 or n > 100_000_000:
                raise ArtifactError(path, f"corrupt safetensors header (claims {n} bytes, file has {size})")
            header = json.loads(f.read(n))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ArtifactError(path, f"corrupt safetensors header ({err.__class__.__name__})") from None
    except OSError as err:
        raise ArtifactError(path, f"cannot open: {err.strerror or err}") from None
    if not isinstance(header, dict):
        raise ArtifactError(path, "corrupt safetensors header (not a JSON object)")
    try:
        end = max((v["data_offsets"][1] for k, v in header.items()
                   if k != "__metadata__" and isinstance(v, dict) and "data_offsets" in v), default=0)
    except (TypeError, IndexError):
        raise ArtifactError(path, "corrupt safetensors header (bad data_offsets)") from None
    if 8 + n + end > size:
        raise ArtifactError(path, f"truncated safetensors file: data ends at byte {8 + n + end}, file has {size}")
    return header, 8 + n


def list_safetensors(path: Path) -> list[TensorInfo]:
    """Every tensor of a safetensors file with dtype, shape and byte range, without reading data."""
    header, base = _read_header(Path(path))
    out = []
    for name, v in header.items():
        if name == "__metadata__" or not isinstance(v, dict):
            continue
        try:
            a, b = (int(x) for x in v["data_offsets"])
            out.append(TensorInfo(name, str(v["dtype"]), tuple(int(s) for s in v["shape"]), base + a, b - a))
        except (KeyError, TypeError, ValueError):
            raise ArtifactError(path, f"corrupt safetensors header (entry {name!r})") from None
    return sorted(out, key=lambda t: t.start)  # file order: sequential reads


def read_safetensor(f, info: TensorInfo, path: Path | str = "") -> Any:
    """One tensor from an open file through its own copy-on-write map (the file is never written).

    The map lives as long as the returned tensor: drop the tensor and its pages leave the process.
    """
    import torch

    dtype = getattr(torch, ST_DTYPES.get(info.dtype, ""), None)
    if dtype is None:
        raise ArtifactError(path, f"tensor {info.name}: dtype {info.dtype} not supported by this torch")
    if info.nbytes == 0:
        return torch.empty(info.shape, dtype=dtype)
    page = mmap.ALLOCATIONGRANULARITY
    base = info.start // page * page
    m = mmap.mmap(f.fileno(), info.start - base + info.nbytes, offset=base, access=mmap.ACCESS_COPY)
    item = torch.empty((), dtype=dtype).element_size()
    if (info.start - base) % item:  # misaligned (odd-sized tensors before it): copy instead
        data = bytearray(m[info.start - base:info.start - base + info.nbytes])
        m.close()
        return torch.frombuffer(data, dtype=dtype).reshape(info.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = torch.frombuffer(m, dtype=dtype, offset=info.start - base, count=info.nbytes // item)
    return t.reshape(info.shape)


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


def load_pickle(path: Path, allow_namespace: bool = False) -> Any:
    """torch.load with weights_only=True (and mmap when the file allows it); refuse anything else.

    ``allow_namespace`` lets ``argparse.Namespace`` through (Megatron stores its command line
    that way): it is a plain attribute bag whose reconstruction runs no code from the file.
    """
    import torch

    path = Path(path)
    allowed = []
    if allow_namespace:
        import argparse
        allowed.append(argparse.Namespace)
    try:
        mmap_ok = zipfile.is_zipfile(path)  # mmap needs the zip-based format of torch >= 1.6
        with torch.serialization.safe_globals(allowed), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(str(path), map_location="cpu", weights_only=True, mmap=mmap_ok)
    except pickle.UnpicklingError as err:
        raise UnsafePickleError(
            path, "refused: this pickle needs arbitrary code to load (weights_only=True); "
                  f"nothing in it was run ({_refusal(err)})") from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile, struct.error) as err:
        first = str(err).strip().splitlines()[0][:200] if str(err).strip() else err.__class__.__name__
        raise ArtifactError(path, f"cannot read torch file: {first}") from None


def is_optimizer_state(obj: Any) -> bool:
    """A torch optimizer state_dict ({'state': ..., 'param_groups': [...]})."""
    return isinstance(obj, dict) and isinstance(obj.get("param_groups"), list) and "state" in obj


def _flatten(obj: dict, prefix: str, out: dict, depth: int) -> None:
    import torch

    for key, value in obj.items():
        if not isinstance(key, str):
            continue
        name = f"{prefix}{key}"
        if isinstance(value, torch.Tensor):
            out[name] = value
        elif isinstance(value, dict) and depth < 6 and key not in NOT_WEIGHTS and not is_optimizer_state(value):
            _flatten(value, name + ".", out, depth + 1)


def unwrap_state_dict(obj: Any) -> dict[str, Any] | None:
    """Find the tensor dict inside common wrappers ({'model': ..., 'module': ...}), else None.

    Nested module dicts (Megatron's ``language_model.embedding.word_embeddings.weight``) are
    flattened to dotted names; optimizer states and training-state entries are left out.
    """
    import torch

    for _ in range(4):
        if not isinstance(obj, dict) or is_optimizer_state(obj):
            return None
        if obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
            return obj
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
    yield from state.items()
