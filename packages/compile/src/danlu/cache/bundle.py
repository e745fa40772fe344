"""Moving graph-cache entries between machines: a plain, versioned bundle.

Layout: the line ``DANLU-GRAPH-CACHE 1``, then an 8-byte little-endian length and that many
bytes of JSON (``{"entries": [{"key", "entry_bytes", "tensors_bytes", "sha256"}]}``), then
each entry's ``entry.json`` and ``tensors.bin`` bytes in that order. The loader checks the
magic line, the version, every length and checksum, and each entry as the store reads it,
before installing it; nothing in a bundle is unpickled or imported while loading. (An entry
holds the code danlu compiled the graph to, which runs when the graph is used: load bundles
only from a source you trust.)
"""

from __future__ import annotations

import hashlib
import json
import struct

MAGIC = b"DANLU-GRAPH-CACHE 1\n"


def save_cache_artifacts(path: str | None = None) -> bytes:
    """Every graph-cache entry this process loaded or wrote, as one bundle (also written to
    ``path`` when given)."""
    from . import USED, graph_store

    store = graph_store()
    if store is None:
        raise RuntimeError("the graph cache is off (danlu.config.graph_cache)")
    index, chunks = [], []
    for key in sorted(USED):
        try:
            entry_json, blob = store.raw(key)
        except OSError:
            continue  # evicted since
        index.append(
            {
                "key": key,
                "entry_bytes": len(entry_json),
                "tensors_bytes": len(blob),
                "sha256": hashlib.sha256(entry_json + blob).hexdigest(),
            }
        )
        chunks += [entry_json, blob]
    header = json.dumps({"entries": index}).encode()
    data = MAGIC + struct.pack("<Q", len(header)) + header + b"".join(chunks)
    if path is not None:
        with open(path, "wb") as f:
            f.write(data)
    return data


def load_cache_artifacts(data: bytes | str) -> list[str]:
    """Install the entries of a bundle (bytes, or a file path) into the graph cache; returns
    the keys installed. A malformed bundle raises ValueError and installs nothing."""
    from . import graph_store
    from .store import FORMAT, EntryError, decode_tensors

    if isinstance(data, str):
        with open(data, "rb") as f:
            data = f.read()
    if not data.startswith(MAGIC):
        raise ValueError("not a danlu graph-cache bundle (or another version of the format)")
    pos = len(MAGIC)
    if len(data) < pos + 8:
        raise ValueError("bundle truncated in its header")
    (n,) = struct.unpack("<Q", data[pos : pos + 8])
    pos += 8
    try:
        header = json.loads(data[pos : pos + n])
        entries = header["entries"]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"bundle header unreadable: {e}") from e
    pos += n
    checked = []
    for e in entries:
        try:
            key, ne, nt = str(e["key"]), int(e["entry_bytes"]), int(e["tensors_bytes"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"bundle index entry malformed: {err}") from err
        entry_json, blob = data[pos : pos + ne], data[pos + ne : pos + ne + nt]
        pos += ne + nt
        if len(entry_json) != ne or len(blob) != nt:
            raise ValueError(f"bundle truncated in entry {key}")
        if hashlib.sha256(entry_json + blob).hexdigest() != e.get("sha256"):
            raise ValueError(f"bundle entry {key} changed (checksum)")
        try:
            entry = json.loads(entry_json)
            if entry.get("format") != FORMAT or entry.get("key") != key or not key.isalnum():
                raise EntryError("format or key mismatch")
            decode_tensors(entry["tensors"], blob)  # every tensor's bytes check out
        except (ValueError, KeyError, TypeError, EntryError) as err:
            raise ValueError(f"bundle entry {key} invalid: {err}") from err
        checked.append((key, entry_json, blob))
    if pos != len(data):
        raise ValueError("bundle has trailing bytes")
    store = graph_store()
    if store is None:
        raise RuntimeError("the graph cache is off (danlu.config.graph_cache)")
    installed = []
    for key, entry_json, blob in checked:
        store.install(key, entry_json, blob)
        installed.append(key)
    return installed
