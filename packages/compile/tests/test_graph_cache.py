"""The whole-graph cache: hits in this process and in a new one give eager's values and
gradients; misses say which key component differed; corrupt, truncated and concurrently
written entries are misses, never crashes; the size bound evicts the least recently used;
bundles move entries to another cache and malformed ones are refused."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest
import torch

import danlu
from danlu.cache import graph_store


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.bn = torch.nn.BatchNorm1d(16)  # running statistics: inputs the program writes
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x):
        n = x.shape[-1]
        mask = torch.arange(n).view(1, n).lt(n - 2).float().exp()  # a folded constant
        return self.fc2(torch.relu(self.bn(self.fc1(x * mask))))


@pytest.fixture
def cache_dir(tmp_path):
    with danlu.config.patch(cache_dir=str(tmp_path), graph_cache=True):
        yield tmp_path


def _step(model, x):
    out = model(x)
    out.square().sum().backward()
    return out.detach(), [p.grad.clone() for p in model.parameters()]


def _compare(seed=0):
    """A training step compiled and eager from the same weights; both results."""
    torch.manual_seed(seed)
    eager = Net()
    compiled_base = Net()
    compiled_base.load_state_dict(eager.state_dict())
    x = torch.randn(5, 8)
    ref = _step(eager, x)
    got = _step(danlu.compile(compiled_base), x)
    torch.testing.assert_close(got[0], ref[0])
    for a, b in zip(got[1], ref[1]):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(compiled_base.bn.running_mean, eager.bn.running_mean)
    return danlu.CompileStats.current().graphs


def _entries(root):
    return [p for p in (root / "graphs" / "entries").iterdir() if not p.name.startswith(".")]


def test_hit_after_reset_matches_eager_and_skips_the_compilers(cache_dir):
    danlu.reset()
    (first,) = _compare()
    assert first.cache == "miss" and len(_entries(cache_dir)) == 1
    danlu.reset()
    (second,) = _compare(seed=1)
    assert second.cache == "hit"
    assert second.kernels == first.kernels  # the loaded graphs report their kernels
    assert "lowering" not in second.phases and "autograd" not in second.phases
    stats = danlu.CompileStats.current()
    assert "graph cache hit" in stats.summary()


def test_gpu_build_workers_are_asked_for_before_a_real_compile_only(cache_dir, monkeypatch):
    """The inductor backend asks danlu-inductor to start its GPU build workers when a graph
    is compiled for real (before the autograd phase: the workers start meanwhile), with the
    graph's example inputs; a graph cache hit compiles nothing and asks for nothing."""
    import danlu_inductor

    asked = []
    monkeypatch.setattr(
        danlu_inductor, "start_build_workers", lambda inputs: asked.append(list(inputs))
    )
    danlu.reset()
    _compare()
    assert len(asked) == 1
    assert any(isinstance(a, torch.Tensor) and a.shape == (5, 8) for a in asked[0]), [
        getattr(a, "shape", a) for a in asked[0]
    ]
    danlu.reset()
    (second,) = _compare(seed=1)
    assert second.cache == "hit" and len(asked) == 1


def test_hit_in_a_new_process(cache_dir):
    danlu.reset()
    _compare()
    script = textwrap.dedent(
        f"""
        import sys, torch, danlu
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_graph_cache import _compare
        danlu.config.cache_dir = {str(cache_dir)!r}
        (g,) = _compare(seed=3)
        print(g.cache)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-1] == "hit"


def test_miss_names_the_component_that_differs(cache_dir, caplog):
    danlu.reset()
    f = danlu.compile(lambda x: (x.sin() * 2).sum(-1))
    f(torch.randn(3, 4))
    danlu.reset()
    with caplog.at_level("INFO", logger="danlu.cache"):
        f = danlu.compile(lambda x: (x.sin() * 2).sum(-1))
        f(torch.randn(3, 5))  # same code, another input shape
    assert "differs in: inputs" in caplog.text


def test_code_changing_settings_are_part_of_the_key(cache_dir, caplog, monkeypatch):
    # an entry compiled with one layout choice must not be loaded under another
    monkeypatch.setenv("DANLU_CONV_CHANNELS_LAST", "0")
    danlu.reset()
    (first,) = _compare()
    assert first.cache == "miss"
    monkeypatch.setenv("DANLU_CONV_CHANNELS_LAST", "1")
    danlu.reset()
    with caplog.at_level("INFO", logger="danlu.cache"):
        (second,) = _compare(seed=1)
    assert second.cache == "miss" and "differs in: state" in caplog.text
    monkeypatch.setenv("DANLU_CONV_CHANNELS_LAST", "0")
    danlu.reset()
    (third,) = _compare(seed=2)
    assert third.cache == "hit"


@pytest.mark.parametrize("damage", ["truncate_tensors", "garble_entry", "remove_tensors"])
def test_corrupt_entries_are_misses_and_removed(cache_dir, caplog, damage):
    danlu.reset()
    _compare()
    (entry,) = _entries(cache_dir)
    if damage == "truncate_tensors":
        data = (entry / "tensors.bin").read_bytes()
        (entry / "tensors.bin").write_bytes(data[: len(data) // 2])
    elif damage == "garble_entry":
        (entry / "entry.json").write_text('{"format": 1, "key": ')
    else:
        (entry / "tensors.bin").unlink()
    danlu.reset()
    with caplog.at_level("INFO", logger="danlu.cache"):
        (g,) = _compare(seed=2)  # values still eager's: compiled afresh
    assert g.cache == "miss"
    assert "removed" in caplog.text
    assert len(_entries(cache_dir)) == 1  # the fresh compile stored a good entry again


def test_an_entry_that_fails_to_load_is_a_miss(cache_dir, caplog):
    danlu.reset()
    _compare()
    (entry,) = _entries(cache_dir)
    meta = json.loads((entry / "entry.json").read_text())
    meta["program"]["graphs"]["forward"]["backend"] = "no-such-backend"
    (entry / "entry.json").write_text(json.dumps(meta))
    danlu.reset()
    with caplog.at_level("INFO", logger="danlu.cache"):
        (g,) = _compare(seed=4)
    assert g.cache == "miss" and "does not load" in caplog.text


def test_concurrent_writers_leave_one_good_entry(cache_dir):
    script = textwrap.dedent(
        f"""
        import sys, torch, danlu
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_graph_cache import _compare
        danlu.config.cache_dir = {str(cache_dir)!r}
        (g,) = _compare(seed=5)
        print(g.cache)
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert all(o.split()[-1] in ("hit", "miss") for o in outs), outs
    assert len(_entries(cache_dir)) == 1
    danlu.reset()
    (g,) = _compare(seed=6)
    assert g.cache == "hit"


def test_size_bound_evicts_least_recently_used(cache_dir):
    danlu.reset()
    for n in (3, 4, 5):
        danlu.compile(lambda x: (x.cos() + 1).sum())(torch.randn(n, 2))
    assert len(_entries(cache_dir)) == 3
    store = graph_store()
    sizes = sorted(sum(f.stat().st_size for f in e.iterdir()) for e in _entries(cache_dir))
    with danlu.config.patch(graph_cache_max_bytes=sizes[-1] + sizes[-2]):
        graph_store()  # picks up the new bound
        assert len(store.evict()) == 1
    assert len(_entries(cache_dir)) == 2


def test_cache_directory_is_private(cache_dir):
    danlu.reset()
    danlu.compile(lambda x: x * 3)(torch.randn(2))
    mode = stat.S_IMODE(os.stat(cache_dir / "graphs").st_mode)
    assert mode == 0o700, oct(mode)


def test_bundle_moves_entries_to_another_cache(cache_dir, tmp_path_factory):
    danlu.reset()
    _compare()
    bundle = danlu.save_cache_artifacts()
    other = tmp_path_factory.mktemp("other_machine")
    with danlu.config.patch(cache_dir=str(other)):
        assert len(danlu.load_cache_artifacts(bundle)) == 1
        danlu.reset()
        (g,) = _compare(seed=7)
        assert g.cache == "hit"
    for bad in (bundle[:-10], b"not a bundle", bundle[:30] + b"x" + bundle[31:]):
        with pytest.raises(ValueError):
            danlu.load_cache_artifacts(bad)


def test_dynamic_graphs_are_not_stored(cache_dir):
    danlu.reset()
    f = danlu.compile(lambda x: x.relu() * 2, dynamic=True)
    f(torch.randn(3, 4))
    f(torch.randn(5, 4))
    assert not _entries(cache_dir)


def test_cache_off(cache_dir):
    danlu.reset()
    with danlu.config.patch(graph_cache=False):
        danlu.compile(lambda x: x - 1)(torch.randn(2))
    assert not (cache_dir / "graphs").exists() or not _entries(cache_dir)


def test_stored_tensors_keep_their_values_and_exact_layouts():
    # kernels are built for a constant's strides: an expanded mask (stride 0), a slice of a
    # bigger tensor, a permutation and a tensor with overlapping rows must come back with
    # the same strides, not as dense copies
    from danlu.cache.store import decode_tensors, encode_tensors

    base = torch.randn(6, 10)
    tensors = {
        "expanded": torch.randn(1, 7).expand(5, 7),
        "sliced": base[1:4, 2:9],
        "permuted": torch.randn(3, 4, 5).permute(2, 0, 1),
        "overlapping": torch.arange(12.0).as_strided((4, 6), (2, 1)),
        "flags": torch.rand(3, 2) > 0.5,
        "empty": torch.empty(0, 3),
    }
    index, blob = encode_tensors(tensors)
    back = decode_tensors(index, blob)
    for name, t in tensors.items():
        assert back[name].stride() == t.stride() and back[name].shape == t.shape, name
        assert back[name].dtype == t.dtype
        torch.testing.assert_close(back[name], t)
    assert sum(e["nbytes"] for e in index) == 4 * (7 + 2 * 10 + 7 + 60 + 12) + 6


def test_a_gpu_module_starts_its_build_workers_when_compiled(monkeypatch):
    """``danlu.compile(module)`` with the inductor backend starts the Triton build workers at
    once for a module whose weights are on a CUDA device (their start then overlaps the first
    call's capture), with one of those weights; a CPU module, another backend, or a plain
    function asks for nothing."""
    import danlu_inductor
    from danlu.backends import start_build_workers_for

    asked = []
    monkeypatch.setattr(
        danlu_inductor, "start_build_workers", lambda inputs: asked.append(list(inputs))
    )

    class OnGpu:  # a weight stand-in on a machine without a GPU: only its device is read
        device = torch.device("cuda", 0)

    class GpuModule:
        def parameters(self):
            return iter([OnGpu()])

        def buffers(self):
            return iter([])

    start_build_workers_for(GpuModule())
    assert len(asked) == 1 and asked[0][0].device == torch.device("cuda", 0)
    danlu.compile(torch.nn.Linear(3, 4))
    danlu.compile(torch.nn.Linear(3, 4), backend="aot_eager")
    danlu.compile(lambda x: x + 1)
    assert len(asked) == 1
    monkeypatch.setattr(torch.nn.Linear, "parameters", lambda self: iter([OnGpu()]))
    danlu.compile(torch.nn.Linear(3, 4))
    assert len(asked) == 2
    danlu.compile(torch.nn.Linear(3, 4), backend="aot_eager")
    assert len(asked) == 2
