"""danlu.compile under DistributedDataParallel and FSDP2, in 2 processes on the CPU (gloo),
against the same training eagerly: losses, gradients and parameters after 3 SGD steps, what
was compiled, and how DDP's graphs were split at its gradient buckets. The cases live in
distributed_cases.py and run once per test session, in one pair of processes."""

from __future__ import annotations

import multiprocessing
import queue as queue_mod
import socket
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

import distributed_cases  # noqa: E402

WORLD = 2
TIMEOUT_S = 420


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def results():
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    names = list(distributed_cases.CASES)
    port = _free_port()
    procs = [
        ctx.Process(target=distributed_cases.worker, args=(r, WORLD, port, names, q))
        for r in range(WORLD)
    ]
    for p in procs:
        p.start()
    out: dict = {}
    try:
        for _ in range(WORLD * len(names)):
            rank, name, result = q.get(timeout=TIMEOUT_S)
            out.setdefault(name, {})[rank] = result
    except queue_mod.Empty:
        pytest.fail(f"distributed cases did not finish in {TIMEOUT_S} s; got {sorted(out)}")
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return out


def _ok(results, name):
    per_rank = results[name]
    assert set(per_rank) == set(range(WORLD)), per_rank
    for rank, r in per_rank.items():
        assert "error" not in r, f"rank {rank}:\n{r['error']}"
        assert r["losses_ok"] and r["grads_ok"] and r["params_ok"], (rank, r)
    return per_rank[0]


@pytest.mark.parametrize("name", list(distributed_cases.CASES))
def test_matches_eager_distributed_training(results, name):
    r = _ok(results, name)
    assert r["graphs"] >= 1 and r["kernels"] >= 1, r


def test_ddp_graph_is_split_at_bucket_boundaries(results):
    r = _ok(results, "ddp_transformer")
    # 3 blocks of ~50 KB of parameters against 20 KB buckets: several pieces, no breaks
    assert r["ddp_pieces"] and r["ddp_pieces"][0] >= 3, r
    assert r["breaks"] == 0, r
    assert any("split into" in line for line in r["ddp_log"]), r["ddp_log"]  # DANLU_LOGS=ddp
    assert _ok(results, "ddp_convnet")["ddp_pieces"][0] >= 2


def test_ddp_graph_within_one_bucket_stays_whole(results):
    r = _ok(results, "ddp_one_bucket")
    assert r["ddp_pieces"] == [] and r["ddp_not_split"], r
    assert r["graphs"] == 1, r


def test_ddp_of_a_compiled_module_is_split_too(results):
    assert _ok(results, "ddp_inside_compile")["ddp_pieces"], results["ddp_inside_compile"]


def test_ddp_no_sync_accumulation(results):
    assert _ok(results, "ddp_no_sync_accumulation")["ddp_pieces"]


def test_torch_has_the_hook_ddp_splitting_relies_on():
    from torch.nn.parallel import DistributedDataParallel

    assert hasattr(DistributedDataParallel, "_get_active_ddp_module")
    assert torch.nn.parallel.DistributedDataParallel._get_active_ddp_module() is None


def test_collectives_inside_compiled_code_break_the_graph(results):
    assert _ok(results, "collectives_in_compiled_code")["breaks"] >= 2


def test_fsdp2_hooks_say_why_they_break_the_graph(results):
    r = _ok(results, "fsdp2_transformer")
    assert r["break_reasons"], r
    assert all("FSDP2's pre/post-forward hooks" in reason for reason in r["break_reasons"])
