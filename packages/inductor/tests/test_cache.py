"""The on-disk kernel cache: hits, corrupt entries rebuilt, concurrent writers."""

from __future__ import annotations

import threading

import torch
from helpers import aten_graph

from danlu_inductor import compile_fx, compile_fx_batch
from danlu_inductor.codegen.cpp import compiler


def _fresh_graph(scale):
    x = torch.randn(5, 7)
    return aten_graph(lambda x: (x * scale).sin() + 1, x), x


def test_cache_hit(tmp_path, monkeypatch):
    monkeypatch.setenv("DANLU_CACHE_DIR", str(tmp_path))
    gm, x = _fresh_graph(3.25)
    first = compile_fx(gm, [x])
    lib = first.report["library"]
    assert lib.startswith(str(tmp_path))
    hits = compiler.CompileStats.hits
    second = compile_fx(gm, [x])
    assert compiler.CompileStats.hits == hits + 1 and second.report["library"] == lib
    torch.testing.assert_close(second(x), (x * 3.25).sin() + 1)


def test_corrupt_entry_is_detected_and_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("DANLU_CACHE_DIR", str(tmp_path))
    source = 'extern "C" int danlu_cache_probe() { return 42; }\n'
    key = compiler.cache_key(source, compiler.BASE_FLAGS + compiler.opt_flags())
    path = compiler.cache_dir() / key[:2] / f"{key}.so"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF truncated")  # what a crashed writer without rename would leave
    misses = compiler.CompileStats.misses
    lib, built = compiler.compile_library(source, ["danlu_cache_probe"])
    assert built == path and compiler.CompileStats.misses == misses + 1
    assert lib.danlu_cache_probe() == 42


def test_concurrent_writers_of_one_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("DANLU_CACHE_DIR", str(tmp_path))
    gm, x = _fresh_graph(-1.5)
    results, errors = [], []

    def work():
        try:
            results.append(compile_fx(gm, [x]))
        except Exception as e:  # pragma: no cover - the assertion below reports it
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for r in results:
        torch.testing.assert_close(r(x), (x * -1.5).sin() + 1)
    assert len(list(tmp_path.rglob("*.so"))) == 1  # one entry, no leftovers
    assert not [p for p in tmp_path.rglob("tmp*") if p.is_dir()]


def test_many_kernels_compile_in_parallel_units(tmp_path, monkeypatch):
    monkeypatch.setenv("DANLU_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("DANLU_COMPILE_THREADS", "2")
    x = torch.randn(6, 5)
    fns = [lambda x, k=k: (x * (k + 0.5)).cos() - k for k in range(8)]
    items = [(aten_graph(f, x), [x]) for f in fns]
    compiled = compile_fx_batch(items)
    assert compiler.CompileStats.units == 2  # 8 kernels, 2 workers: two translation units
    for f, c in zip(fns, compiled):
        torch.testing.assert_close(c(x), f(x))
    assert len(list(tmp_path.rglob("*.so"))) == 1  # still one library, one cache entry
