"""Drop the memo entries a pickle never reads back, so unpickling holds only what it returns.

Python's pickler memoizes every object it writes (BINPUT), and an unpickler keeps each memoized
object alive until ``load`` returns. For a torch checkpoint that is every tensor's storage record,
argument tuple and hook dict: about 500 bytes per tensor that nothing refers to again, 150 MB for
an Adam state of 100,000 parameters (bench/bench_many_tensors.py). ``prune_memo`` rewrites the
opcode stream keeping only the puts that some later get reads, renumbered densely, and drops
protocol-4 frame markers (their lengths no longer hold; frames are optional).

It only walks opcode boundaries (one pass over the opcodes, one over the memo operations; nothing
is built); an opcode it does not know raises ``ValueError`` and the caller unpickles the original
instead. A walk that went wrong could only yield a stream the unpickler rejects: what may be
built is still decided by the unpickler's own ``find_class``.
"""
from __future__ import annotations

import io
import struct
from array import array

# Bytes each opcode occupies with its fixed-size argument (0: not a fixed-size opcode).
_SIZE = [0] * 256
for _ops, _size in ((b"(.}])t\x85\x86\x87suaeN\x88\x89RQb\x81\x93\x94012", 1), (b"K\x80", 2), (b"M", 3),
                    (b"J", 5), (b"G", 9)):
    for _op in _ops:
        _SIZE[_op] = _size
# Opcodes with a length prefix of this many bytes before their data.
_PREFIX = {ord("X"): 4, 0x8C: 1, 0x8D: 8, 0x8A: 1, 0x8B: 4, ord("C"): 1, ord("B"): 4, 0x8E: 8}
PUT, LONG_PUT, GET, LONG_GET, MEMOIZE, FRAME = ord("q"), ord("r"), ord("h"), ord("j"), 0x94, 0x95
_WIDTH = {PUT: 1, GET: 1, LONG_PUT: 4, LONG_GET: 4, FRAME: 8, MEMOIZE: 0}
STOP, GLOBAL = ord("."), ord("c")


def _memo_ops(data: bytes) -> tuple[array, array, array]:
    """(opcode, start, memo index) of every put, get, memoize and frame (index -1), in order."""
    ops, starts, indices = array("B"), array("Q" if len(data) >> 32 else "I"), array("q" if len(data) >> 32 else "i")
    size, i, memoized = _SIZE, 0, 0
    while True:
        op = data[i]
        step = size[op]
        if step:
            if op == MEMOIZE:  # protocol 4: the next index, implicitly
                ops.append(op)
                starts.append(i)
                indices.append(memoized)
                memoized += 1
            elif op == STOP:
                return ops, starts, indices
            i += step
        elif op in _WIDTH:
            width = _WIDTH[op]
            ops.append(op)
            starts.append(i)
            indices.append(int.from_bytes(data[i + 1:i + 1 + width], "little") if op != FRAME else -1)
            i += 1 + width
        elif op in _PREFIX:
            n = _PREFIX[op]
            i += 1 + n + int.from_bytes(data[i + 1:i + 1 + n], "little")
        elif op == GLOBAL:
            i = data.index(b"\n", data.index(b"\n", i + 1) + 1) + 1
        else:
            raise ValueError(f"opcode {op:#x} at byte {i}")


def prune_memo(data: bytes) -> io.BytesIO:
    """``data`` with only the memo puts that a get reads back, as a stream to unpickle from
    (``ValueError`` when unsure)."""
    ops, starts, indices = _memo_ops(data)
    if MEMOIZE in ops and (PUT in ops or LONG_PUT in ops):
        raise ValueError("both PUT and MEMOIZE")  # MEMOIZE's implicit index counts PUTs too
    read = {index for op, index in zip(ops, indices) if op in (GET, LONG_GET)}
    out, last, renumber, view = io.BytesIO(), 0, {}, memoryview(data)
    for op, start, index in zip(ops, starts, indices):
        out.write(view[last:start])
        last = start + 1 + _WIDTH[op]
        if op in (GET, LONG_GET):
            if index not in renumber:
                raise ValueError(f"get of memo {index} before its put")
            out.write(b"j" + struct.pack("<I", renumber[index]))
        elif op != FRAME and index in read:
            renumber[index] = len(renumber)
            out.write(b"r" + struct.pack("<I", renumber[index]))
    out.write(view[last:])
    out.seek(0)
    return out
