"""Read tensors from safetensors and torch pickles without running any code from the file.

Everything pickled goes through ``torch.load(weights_only=True, mmap=True)``; a file that needs
arbitrary objects is refused with UnsafePickleError and nothing in it runs. Safetensors files are
memory-mapped and read one tensor at a time, so peak memory stays near the largest tensor.
"""
from __future__ import annotations

import json
import pickle
import struct
import zipfile
from pathlib import Path
from typing import Any, Iterator

from ..errors import ArtifactError, UnsafePickleError

PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
NESTED_KEYS = ("state_dict", "model", "module", "model_state_dict")


def safetensors_header(path: Path) -> dict[str, Any]:
    """Parse the JSON header of a .safetensors file (tensor names, dtypes, shapes, offsets)."""
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
    if not isinstance(header, dict):
        raise ArtifactError(path, "corrupt safetensors header (not a JSON object)")
    end = max((v["data_offsets"][1] for k, v in header.items()
               if k != "__metadata__" and isinstance(v, dict) and "data_offsets" in v), default=0)
    if 8 + n + end > size:
        raise ArtifactError(path, f"truncated safetensors file: data ends at byte {8 + n + end}, file has {size}")
    return header


def iter_safetensors(path: Path) -> Iterator[tuple[str, Any]]:
    """Yield (name, tensor) one at a time from a memory-mapped safetensors file."""
    from safetensors import safe_open

    safetensors_header(path)  # clear errors for truncated / corrupt files
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            for name in f.keys():
                yield name, f.get_tensor(name)
    except (OSError, ValueError, RuntimeError) as err:
        raise ArtifactError(path, f"cannot read safetensors: {err}") from None


def load_pickle(path: Path) -> Any:
    """torch.load with weights_only=True (and mmap when the file allows it); refuse anything else."""
    import torch

    try:
        mmap = zipfile.is_zipfile(path)  # mmap needs the zip-based format of torch >= 1.6
        return torch.load(str(path), map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as err:
        first = str(err).strip().splitlines()[-1] if str(err).strip() else ""
        raise UnsafePickleError(
            path, "refused: this pickle needs arbitrary code to load (weights_only=True); "
                  f"nothing in it was run. {first[:160]}") from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile) as err:
        raise ArtifactError(path, f"cannot read torch file: {str(err).splitlines()[0][:200]}") from None


def unwrap_state_dict(obj: Any) -> dict[str, Any] | None:
    """Find the tensor dict inside common wrappers ({'model': ..., 'module': ...}), else None."""
    import torch

    for _ in range(3):
        if not isinstance(obj, dict):
            return None
        if obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
            return obj
        inner = next((obj[k] for k in NESTED_KEYS if isinstance(obj.get(k), dict)), None)
        if inner is None:
            tensors = {k: v for k, v in obj.items() if isinstance(v, torch.Tensor)}
            return tensors or None
        obj = inner
    return None


def iter_tensors(path: Path) -> Iterator[tuple[str, Any]]:
    """Yield (name, tensor) from a .safetensors file or a weights-only torch pickle."""
    path = Path(path)
    if path.suffix == ".safetensors":
        yield from iter_safetensors(path)
        return
    state = unwrap_state_dict(load_pickle(path))
    if state is None:
        raise ArtifactError(path, "holds no tensors (expected a state dict)")
    yield from state.items()
