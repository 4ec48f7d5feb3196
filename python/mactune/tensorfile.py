"""safetensors files with numpy alone: what mactune.record writes and mactune.inloop reads.

The format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length
N, N bytes of JSON ``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
{str: str}}`` padded with spaces to a multiple of 8, then the tensor bytes, which must tile the
data section exactly (the project's reader, replay/safetensors.h, checks that).
"""

from __future__ import annotations

import json
import os
import struct
from typing import Dict, Mapping, Tuple

import numpy as np

_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "F64": np.dtype("<f8"),
           "I32": np.dtype("<i4"), "I64": np.dtype("<i8")}
_NAMES = {v: k for k, v in _DTYPES.items()}


def save(path: str | os.PathLike, tensors: Mapping[str, np.ndarray],
         metadata: Mapping[str, str] | None = None) -> None:
    """Writes `tensors` (name -> array; F32, F16, F64, I32, I64) and string metadata.

    Written to a temporary file and renamed into place, so a reader never sees half a file.
    """
    header: Dict[str, object] = {}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        dt = a.dtype.newbyteorder("<")
        if dt not in _NAMES:
            raise ValueError(f"{name}: dtype {a.dtype} cannot be written (use float32)")
        raw = a.astype(dt, copy=False).tobytes()
        header[name] = {"dtype": _NAMES[dt], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        bad = [k for k, v in metadata.items() if not isinstance(v, str)]
        if bad:
            raise ValueError(f"metadata values must be strings: {', '.join(bad)}")
        header["__metadata__"] = dict(metadata)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    check_output(path, "trace")
    tmp = os.fspath(path) + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
    os.replace(tmp, path)


def check_output(path: str | os.PathLike, what: str, inputs=()) -> None:
    """The output-path rule of the C++ commands (kernels/output_paths.h) for Python writers:
    `path` must not be a directory, a device, a FIFO or a socket (the file is replaced by a
    rename, which would replace the device), must not name one of `inputs` (same file by
    device and inode, or the same resolved path), and its folder must exist."""
    import stat as _stat
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    if st is not None and not _stat.S_ISREG(st.st_mode):
        kind = ("a directory" if _stat.S_ISDIR(st.st_mode) else
                "a character device" if _stat.S_ISCHR(st.st_mode) else
                "a FIFO" if _stat.S_ISFIFO(st.st_mode) else
                "a socket" if _stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise ValueError(f"cannot write {what} '{p}': it is {kind}, not a regular file")
    folder = os.path.dirname(p) or "."
    if not os.path.isdir(folder):
        raise ValueError(f"cannot write {what} '{p}': folder '{folder}' does not exist")
    real = os.path.realpath(p)
    for q in inputs:
        q = os.fspath(q)
        same = os.path.realpath(q) == real
        if not same and st is not None and os.path.exists(q):
            qs = os.stat(q)
            same = (qs.st_dev, qs.st_ino) == (st.st_dev, st.st_ino)
        if same:
            raise ValueError(f"cannot write {what} '{p}': it is the input '{q}'; give another path")


def load(path: str | os.PathLike) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    """Reads a whole file: ({name: array}, metadata). Arrays are read-only views of one buffer."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: not a safetensors file (shorter than 8 bytes)")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    out = {}
    for name, info in header.items():
        dt = _DTYPES.get(info["dtype"])
        if dt is None:
            raise ValueError(f"{path}: tensor '{name}' has unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        count = (end - begin) // dt.itemsize
        out[name] = np.frombuffer(raw, dt, count, base + begin).reshape(info["shape"])
    return out, meta
