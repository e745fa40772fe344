"""The graph cache on disk: one directory per entry, written atomically, read with checks.

``<root>/entries/<key>/entry.json`` holds the format version, the key's components and the
compiled program described as plain data; ``tensors.bin`` holds its constant tensors' bytes,
each listed in entry.json with dtype, shape, strides, offset, length and checksum. Nothing is
unpickled. An entry is written into a temporary directory and renamed into place, so readers
see a whole entry or none, and of two processes writing the same key one wins and the other's
copy is dropped. An entry that fails to read (truncated, corrupt, another format) is a miss
with the reason, and is removed. The root is created private to the user (0700); a hit
refreshes the entry's time, and past ``max_bytes`` the least recently used entries go.

An entry holds code danlu runs (the wrapper and kernel sources it was compiled to): install
entries (``load_cache_artifacts``) only from a source you trust, as you would a wheel.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import tempfile
import time

import torch

FORMAT = 1
_DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
        torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128,
    )
}  # fmt: skip


class EntryError(Exception):
    """An entry that cannot be used (the message says why)."""


def _span(shape, stride) -> int:
    """Elements of storage a layout reaches, from its first element to its last."""
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, stride))


def _tensor_bytes(t: torch.Tensor) -> bytes:
    """The storage ``t`` spans, first element to last: its layout is then rebuilt exactly,
    strides included (an expanded constant has stride 0, and the kernels were built for
    those strides), with ``as_strided`` over those bytes."""
    t = t.detach()
    n = _span(t.shape, t.stride())
    if n == 0:
        return b""
    flat = t.as_strided((n,), (1,), t.storage_offset()).to("cpu").clone()
    return raw_bytes(flat)


def raw_bytes(t: torch.Tensor) -> bytes:
    """The bytes of a contiguous CPU tensor, copied in one go (``bytes(storage)`` walks the
    storage one byte at a time in Python: 23 s for T5's 11 MB of folded constants)."""
    assert t.device.type == "cpu" and t.is_contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b""


def encode_tensors(tensors: dict) -> tuple[list, bytes]:
    index, chunks, offset = [], [], 0
    for name in sorted(tensors):
        t = tensors[name]
        dtype = str(t.dtype).removeprefix("torch.")
        if dtype not in _DTYPES:
            raise EntryError(f"tensor {name}: dtype {dtype} is not stored")
        data = _tensor_bytes(t)
        index.append(
            {
                "name": name,
                "dtype": dtype,
                "shape": list(t.shape),
                "stride": list(t.stride()),
                "device": str(t.device),
                "offset": offset,
                "nbytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
        chunks.append(data)
        offset += len(data)
    return index, b"".join(chunks)


def decode_tensors(index: list, blob: bytes) -> dict:
    out = {}
    for e in index:
        dtype = _DTYPES.get(e.get("dtype"))
        if dtype is None:
            raise EntryError(f"tensor {e.get('name')}: unknown dtype {e.get('dtype')!r}")
        start, n = int(e["offset"]), int(e["nbytes"])
        data = blob[start : start + n]
        if len(data) != n or hashlib.sha256(data).hexdigest() != e["sha256"]:
            raise EntryError(f"tensor {e['name']}: bytes truncated or changed")
        shape, stride = [int(x) for x in e["shape"]], [int(x) for x in e["stride"]]
        span = _span(shape, stride)
        if n != span * dtype.itemsize:
            raise EntryError(f"tensor {e['name']}: {n} bytes for a layout that spans {span}")
        flat = (
            torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype)
            if n
            else torch.empty(0, dtype=dtype)
        )
        device = torch.device(e.get("device", "cpu"))
        if device.type != "cpu":
            flat = flat.to(device)
        out[e["name"]] = flat.as_strided(shape, stride, 0)
    return out


class GraphStore:
    def __init__(self, root: str, max_bytes: int = 2 << 30):
        self.root = root
        self.entries = os.path.join(root, "entries")
        self.max_bytes = max_bytes
        os.makedirs(self.entries, mode=0o700, exist_ok=True)
        try:
            os.chmod(root, 0o700)
        except OSError:
            pass

    def path(self, key: str) -> str:
        if not key.isalnum():
            raise EntryError(f"bad key {key!r}")
        return os.path.join(self.entries, key)

    # ------------------------------------------------------------------ read
    def load(self, key: str) -> tuple[dict, dict]:
        """``(entry, tensors)``; raises ``FileNotFoundError`` (no entry) or ``EntryError``
        (the entry is removed)."""
        path = self.path(key)
        try:
            with open(os.path.join(path, "entry.json"), "rb") as f:
                entry = json.loads(f.read())
            with open(os.path.join(path, "tensors.bin"), "rb") as f:
                blob = f.read()
            if entry.get("format") != FORMAT or entry.get("key") != key:
                raise EntryError(f"entry format {entry.get('format')!r} / key mismatch")
            if len(blob) != int(entry["tensors_bytes"]):
                raise EntryError("tensors.bin has the wrong length")
            tensors = decode_tensors(entry["tensors"], blob)
        except FileNotFoundError:
            if os.path.isdir(path):  # half an entry: removed below
                self.remove(key)
                raise EntryError("entry incomplete") from None
            raise
        except EntryError:
            self.remove(key)
            raise
        except (ValueError, KeyError, TypeError, OSError) as e:
            self.remove(key)
            raise EntryError(f"unreadable entry: {type(e).__name__}: {e}") from e
        now = time.time()
        try:
            os.utime(os.path.join(path, "entry.json"), (now, now))  # least recently used
        except OSError:
            pass
        return entry, tensors

    def components(self) -> dict:
        """key -> components of every entry (for explaining a miss)."""
        out = {}
        for key in os.listdir(self.entries):
            try:
                with open(os.path.join(self.entries, key, "entry.json"), "rb") as f:
                    out[key] = json.loads(f.read()).get("components", {})
            except (OSError, ValueError):
                continue
        return out

    # ------------------------------------------------------------------ write
    def save(self, key: str, components: dict, program: dict, tensors: dict) -> bool:
        """Write an entry; False when another process wrote it first."""
        index, blob = encode_tensors(tensors)
        entry = {
            "format": FORMAT,
            "key": key,
            "components": components,
            "program": program,
            "tensors": index,
            "tensors_bytes": len(blob),
        }
        return self.install(key, json.dumps(entry).encode(), blob)

    def install(self, key: str, entry_json: bytes, blob: bytes) -> bool:
        target = self.path(key)
        if os.path.isdir(target):
            return False
        tmp = tempfile.mkdtemp(prefix=f".{key}.", dir=self.entries)
        try:
            with open(os.path.join(tmp, "tensors.bin"), "wb") as f:
                f.write(blob)
            with open(os.path.join(tmp, "entry.json"), "wb") as f:
                f.write(entry_json)
            try:
                os.rename(tmp, target)  # atomic: readers see all of it or nothing
            except OSError:  # another writer renamed first
                return False
        finally:
            if os.path.isdir(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
        self.evict()
        return True

    def raw(self, key: str) -> tuple[bytes, bytes]:
        path = self.path(key)
        with open(os.path.join(path, "entry.json"), "rb") as f:
            entry_json = f.read()
        with open(os.path.join(path, "tensors.bin"), "rb") as f:
            return entry_json, f.read()

    def remove(self, key: str) -> None:
        path = self.path(key)
        trash = f"{path}.removed.{os.getpid()}.{time.monotonic_ns()}"
        try:
            os.rename(path, trash)
        except OSError:
            return
        shutil.rmtree(trash, ignore_errors=True)

    def evict(self) -> list[str]:
        """Remove least recently used entries until the cache fits ``max_bytes``."""
        sizes = []
        for key in os.listdir(self.entries):
            path = os.path.join(self.entries, key)
            if key.startswith(".") or ".removed." in key:
                continue
            try:
                size = sum(e.stat().st_size for e in os.scandir(path))
                used = os.stat(os.path.join(path, "entry.json")).st_mtime
            except OSError:
                continue
            sizes.append((used, size, key))
        total = sum(s for _, s, _ in sizes)
        removed = []
        for _, size, key in sorted(sizes):
            if total <= self.max_bytes:
                break
            self.remove(key)
            total -= size
            removed.append(key)
        return removed
