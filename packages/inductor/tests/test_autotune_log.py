"""``DANLU_AUTOTUNE_LOG``: one JSON line per tuned kernel, with each candidate's build seconds
and time, so a GPU run can show which candidates ever win (``benchmarks/autotune_log.py``)."""

from __future__ import annotations

import json
import types

from danlu_inductor.codegen.triton.backend import log_autotune
from danlu_inductor.codegen.triton.heuristics import Config


def _launcher(cands, built):
    return types.SimpleNamespace(
        fn=types.SimpleNamespace(__name__="danlu_red_sum_3"),
        kind="reduction",
        xnumel=4096,
        rnumel=768,
        configs=cands,
        candidates=lambda: cands,
        compile_info=built,
        call_sites=3,
    )


def test_each_candidate_with_its_build_and_time_and_the_winner(tmp_path):
    a, b, c = Config(1, 1024, 4), Config(32, 64, 4), Config(8, 512, 4)
    built = [((1, 1024, 4), None, {"seconds": 1.5}), ((32, 64, 4), None, {"seconds": 0.75})]
    built.append(((8, 512, 4), "out of resources", {"seconds": 0.25}))
    path = tmp_path / "tune.jsonl"
    timings = [(0.0125, a), (0.01, b)]  # c failed to build: never timed
    log_autotune(_launcher([a, b, c], built), timings, b, path=str(path))
    log_autotune(_launcher([a, b], built[:2]), [(0.009, a), (0.01, b)], a, path=str(path))
    first, second = (json.loads(line) for line in path.read_text().splitlines())
    assert first["kernel"] == "danlu_red_sum_3" and first["kind"] == "reduction"
    assert (first["xnumel"], first["rnumel"]) == (4096, 768)
    assert first["candidates"] == [
        [1, 1024, 4, 1.5, 0.0125],
        [32, 64, 4, 0.75, 0.01],
        [8, 512, 4, 0.25, None],
    ]
    assert first["chosen"] == 1 and second["chosen"] == 0 and first["call_sites"] == 3


def test_no_log_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("DANLU_AUTOTUNE_LOG", raising=False)
    monkeypatch.chdir(tmp_path)
    a = Config(1, 1024, 4)
    log_autotune(_launcher([a], []), [(0.01, a)], a)
    assert list(tmp_path.iterdir()) == []


def _fake_kernel(kind="pointwise"):
    meta = {"kind": kind, "xnumel": 1 << 20, "rnumel": 1 if kind == "pointwise" else 512}
    meta.update(params=["a", "b"], uses_err=False, signature={}, size_hints=[], size_args=[])
    return types.SimpleNamespace(danlu_meta=meta, src="def k(): pass", __name__="k")


def test_candidate_count_from_the_environment(monkeypatch):
    from danlu_inductor.codegen.triton.backend import TritonLauncher

    monkeypatch.delenv("DANLU_TRITON_CANDIDATES", raising=False)
    three = TritonLauncher(_fake_kernel())
    monkeypatch.setenv("DANLU_TRITON_CANDIDATES", "1")
    one = TritonLauncher(_fake_kernel())
    assert len(three.candidates()) == 3 and one.candidates() == [three.heuristic()]
    # a choice tuned among three is not reused where only one was built
    assert one.key != three.key
    assert len(TritonLauncher(_fake_kernel(), max_autotune=True).candidates()) > 3
    monkeypatch.setenv("DANLU_TRITON_CANDIDATES", "many")
    assert len(TritonLauncher(_fake_kernel()).candidates()) == 3


def test_candidate_count_per_kind(monkeypatch):
    """Reductions over short rows and columns and 2-D pointwise kernels build two candidates by
    default (a third wins them little, see DEFAULT_CANDIDATES); the variable sets all kinds."""
    from danlu_inductor.codegen.triton.backend import TritonLauncher

    monkeypatch.delenv("DANLU_TRITON_CANDIDATES", raising=False)
    counts = {
        k: len(TritonLauncher(_fake_kernel(k)).candidates())
        for k in ("pointwise", "reduction", "persistent_reduction", "outer_reduction")
    }
    assert counts == {
        "pointwise": 3,
        "reduction": 3,
        "persistent_reduction": 2,
        "outer_reduction": 2,
    }
    monkeypatch.setenv("DANLU_TRITON_CANDIDATES", "3")
    persistent = TritonLauncher(_fake_kernel("persistent_reduction"))
    assert len(persistent.candidates()) == 3
    monkeypatch.setenv("DANLU_TRITON_CANDIDATES", "junk")
    assert len(TritonLauncher(_fake_kernel("outer_reduction")).candidates()) == 2
