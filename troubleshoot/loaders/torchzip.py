"""Torch's zip checkpoints read lazily: the object graph first, each tensor's bytes only when asked.

``torch.load`` builds a torch tensor and storage for every entry before returning: 100,000 tiny
tensors cost about 2 KB each and 15 s (its weights-only unpickler is pure Python). Probes look at
one tensor at a time, so ``load_lazy`` unpickles ``data.pkl`` with the C unpickler into plain
containers whose tensors are ``StoredTensor`` records (name of the storage, dtype, offset, shape,
stride: a few hundred bytes), and ``StoredTensor.load`` reads that tensor's bytes when a probe
needs them. The memo entries the pickle never reads back are dropped first (``prune_memo``), so
unpickling holds no per-tensor leftovers either.

Safety: the unpickler resolves only the globals of a plain tensor pickle (``ALLOWED``), each to a
function of this module that builds a record and calls nothing from the file; ``argparse.Namespace``
only when the caller allows it, as for ``torch.load``. Any other global raises ``Unsupported``
and the caller hands the file to ``torch.load(weights_only=True)``, which refuses or accepts it
exactly as before; nothing from the file runs in either path.
"""
from __future__ import annotations

import collections
import io
import math
import mmap
import os
import pickle
import sys
import warnings
from pathlib import Path
from typing import Any

from ..errors import ArtifactError
from .pickle_memo import prune_memo

# storage class name in the pickle -> torch dtype name
STORAGE_DTYPES = {"FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
                  "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
                  "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
                  "UntypedStorage": "uint8"}
# Spans below this are read into a fresh buffer; larger ones through a private map whose pages
# leave the process with the tensor (a long-lived map keeps every page it touched resident).
SMALL_SPAN = 1 << 20


class Unsupported(Exception):
    """The pickle needs more than a plain tensor pickle: let ``torch.load(weights_only=True)`` decide."""


def read_span(f, start: int, nbytes: int, dtype, path: Path | str = "") -> Any:
    """``nbytes`` of the open file ``f`` from ``start`` as a 1-D tensor of ``dtype``; the file is
    never written (small spans are copied, large ones mapped copy-on-write)."""
    import torch

    item = dtype.itemsize
    if nbytes <= 0:
        return torch.empty(0, dtype=dtype)
    if nbytes < SMALL_SPAN:
        buf = bytearray(nbytes)
        if os.preadv(f.fileno(), [buf], start) != nbytes:
            raise ArtifactError(path, f"truncated file: {nbytes} bytes at offset {start} are missing")
        return torch.frombuffer(buf, dtype=dtype)
    page = mmap.ALLOCATIONGRANULARITY
    base = start // page * page
    m = mmap.mmap(f.fileno(), start - base + nbytes, offset=base, access=mmap.ACCESS_COPY)
    if (start - base) % item:  # misaligned (odd-sized data before it): copy instead
        data = bytearray(m[start - base:start - base + nbytes])
        m.close()
        return torch.frombuffer(data, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.frombuffer(m, dtype=dtype, offset=start - base, count=nbytes // item)


class _Archive:
    """One open torch zip file: torch's own record index plus a file handle for reads."""

    def __init__(self, path: Path, reader: Any) -> None:
        self.path, self.reader = path, reader
        self.file = open(path, "rb")  # noqa: SIM115 - lives as long as the records that read through it
        self.size = os.fstat(self.file.fileno()).st_size
        self.tuples: dict[tuple, tuple] = {}  # one copy of each shape and stride (most repeat)

    def intern(self, value: tuple) -> tuple:
        return self.tuples.setdefault(value, value)


class StoredTensor:
    """A tensor of a torch zip file, not read yet: ``load()`` returns it as a torch tensor."""

    __slots__ = ("archive", "key", "dtype", "storage_numel", "offset", "shape", "stride")

    def __init__(self, archive: _Archive, storage: tuple, offset: int, shape: tuple, stride: tuple) -> None:
        self.archive = archive
        self.key, self.dtype, self.storage_numel = storage
        self.offset, self.shape, self.stride = offset, shape, stride

    def __setstate__(self, state: Any) -> None:  # BUILD must not rewrite what the allowlist made
        raise Unsupported("state on a tensor")

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def load(self) -> Any:
        """The tensor, read from the file now; ArtifactError when the file does not hold it."""
        import torch

        dtype = getattr(torch, self.dtype)
        a = self.archive
        if self.numel() == 0:
            return torch.empty(self.shape, dtype=dtype)
        extent = 1 + sum((n - 1) * s for n, s in zip(self.shape, self.stride))
        item = dtype.itemsize
        name = f"data/{self.key}"
        try:
            start = a.reader.get_record_offset(name)
            stored = a.reader.get_record_size(name)
        except RuntimeError:
            raise ArtifactError(a.path, f"corrupt torch file: storage {self.key[:40]!r} is missing") from None
        if not (0 <= self.offset and self.offset + extent <= self.storage_numel
                and self.storage_numel * item <= stored and start + stored <= a.size):
            raise ArtifactError(a.path, f"corrupt torch file: tensor of shape {list(self.shape)} lies outside "
                                        f"storage {self.key[:40]!r}")
        span = read_span(a.file, start + self.offset * item, extent * item, dtype, a.path)
        return span.as_strided(self.shape, self.stride)


def _rebuild_tensor_v2(storage, offset, shape, stride, requires_grad=False, hooks=None, metadata=None):
    if metadata or not (isinstance(storage, tuple) and len(storage) == 4 and isinstance(storage[0], _Archive)):
        raise Unsupported("tensor metadata, or a storage not read by persistent_load")
    if not (type(offset) is int and isinstance(shape, tuple) and isinstance(stride, tuple)
            and len(shape) == len(stride) and all(type(x) is int and x >= 0 for x in shape + stride)):
        raise Unsupported("odd tensor layout")
    archive = storage[0]
    return StoredTensor(archive, storage[1:], offset, archive.intern(shape), archive.intern(stride))


def _rebuild_parameter(data, requires_grad=False, hooks=None):
    return data


class _StorageType:
    __slots__ = ("dtype",)

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype

    def __setstate__(self, state: Any) -> None:  # BUILD must not rewrite what the allowlist made
        raise Unsupported("state on a storage type")


ALLOWED = {("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
           ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
           ("collections", "OrderedDict"): collections.OrderedDict,
           **{("torch", name): _StorageType(dtype) for name, dtype in STORAGE_DTYPES.items()}}


class _Unpickler(pickle.Unpickler):
    def __init__(self, stream: io.BytesIO, archive: _Archive, allow_namespace: bool) -> None:
        super().__init__(stream)
        self.archive, self.allow_namespace = archive, allow_namespace

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("argparse", "Namespace") and self.allow_namespace:
            import argparse
            return argparse.Namespace
        found = ALLOWED.get((module, name))
        if found is None:
            raise Unsupported(f"{module}.{name}")
        return found

    def persistent_load(self, pid: Any) -> tuple:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], _StorageType)
                and isinstance(pid[2], str) and type(pid[4]) is int and pid[4] >= 0):
            raise Unsupported("odd storage record")
        return self.archive, pid[2], pid[1].dtype, pid[4]


def load_lazy(path: Path, allow_namespace: bool = False) -> Any:
    """The object in torch zip file ``path`` with every tensor a ``StoredTensor``; ``Unsupported``
    for anything but a plain little-endian tensor pickle (the caller then uses ``torch.load``)."""
    import torch

    try:
        reader = torch._C.PyTorchFileReader(str(path))
        if reader.has_record("byteorder") and reader.get_record("byteorder") != b"little" \
                or sys.byteorder != "little" or not reader.has_record("data.pkl"):
            raise Unsupported("byte order or layout")
        archive = _Archive(path, reader)
        start, size = reader.get_record_offset("data.pkl"), reader.get_record_size("data.pkl")
    except RuntimeError as err:
        raise Unsupported(str(err)[:80]) from None
    data = os.pread(archive.file.fileno(), size, start)  # torch stores records uncompressed
    try:
        stream = prune_memo(data)  # memory: only what the pickle reads back stays in the memo
    except (ValueError, IndexError):
        stream = io.BytesIO(data)  # an opcode the walk does not know: unpickle the original
    del data
    try:
        return _Unpickler(stream, archive, allow_namespace).load()
    except Unsupported:
        raise
    except Exception as err:  # noqa: BLE001 - malformed pickle bytes: torch.load gives the verdict
        raise Unsupported(type(err).__name__) from None


def is_tensor(value: Any) -> bool:
    """A torch tensor, loaded or not yet read."""
    if isinstance(value, StoredTensor):
        return True
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def as_tensor(value: Any) -> Any:
    """A torch tensor for a ``StoredTensor`` (read now); anything else unchanged."""
    return value.load() if isinstance(value, StoredTensor) else value


def materialize(obj: Any, depth: int = 0) -> Any:
    """``obj`` with every ``StoredTensor`` inside dicts, lists and tuples read (small objects only:
    batches and the like)."""
    if isinstance(obj, StoredTensor):
        return obj.load()
    if depth > 8:
        return obj
    if isinstance(obj, dict):
        return {k: materialize(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list):
        return [materialize(v, depth + 1) for v in obj]
    if isinstance(obj, tuple):
        return tuple(materialize(v, depth + 1) for v in obj)
    return obj
