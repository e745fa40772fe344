"""The debug directory: one folder per captured graph, every artefact, an index."""

import json
import pathlib

import torch

import danlu
from danlu.testing import same


def _run_dir(root: pathlib.Path) -> pathlib.Path:
    runs = sorted(root.glob("run_*"))
    assert len(runs) == 1, runs
    return runs[0]


def _breaking(x, w):
    y = torch.relu(x @ w)
    if y.sum() > 0:  # data-dependent branch: the graph breaks here
        y = y * 2
    return y.softmax(-1).sum()


def test_training_compile_writes_every_artefact_per_graph(tmp_path):
    danlu.reset()
    with danlu.config.patch(debug_dir=str(tmp_path)):
        compiled = danlu.compile(_breaking)
        x = torch.randn(3, 4, requires_grad=True)
        w = torch.randn(4, 5)
        res = compiled(x, w)
        res.backward()
        ref_x = x.detach().clone().requires_grad_()
        ref = _breaking(ref_x, w)
        ref.backward()
        assert same(ref, res) and same(ref_x.grad, x.grad)
    run = _run_dir(tmp_path)
    index = json.loads((run / "index.json").read_text())
    assert [e["folder"] for e in index] == [f"graph_{i:03d}" for i in range(len(index))]
    # graphs capture kept and ran know where they came from (a capture path may also compile
    # a graph it then discards; that one has no guards and no capture time)
    used = [e for e in index if e["where"]]
    assert len(used) >= 2  # the graph break splits the function
    for entry in used:
        assert "guards.txt" in entry["files"] and "capture" in entry["phases"]
    for entry in index:
        folder = run / entry["folder"]
        on_disk = sorted(p.name for p in folder.iterdir())
        assert sorted(entry["files"]) == on_disk
        for name in (
            "captured_graph.py",
            "captured_graph.txt",
            "aot_graphs.txt",
            "forward_0.aten.txt",
            "forward_0.loop_ir.txt",
            "forward_0.fusion.txt",
            "forward_0.kernels.cpp",
            "forward_0.wrapper.py",
            "backward_0.aten.txt",
            "backward_0.loop_ir.txt",
            "backward_0.kernels.cpp",
        ):
            assert name in on_disk, (entry["folder"], name)
        assert entry["backend"] == "inductor" and entry["kernels"] >= 1
        assert set(entry["phases"]) >= {"autograd", "lowering", "codegen"}
    first = run / used[0]["folder"]
    # the captured graph as code and as a table with shapes
    assert "torch.relu" in (first / "captured_graph.txt").read_text()
    assert "f32[3, 4]" in (first / "captured_graph.txt").read_text()
    compile(first.joinpath("captured_graph.py").read_text(), "captured_graph.py", "exec")
    # guards name the inputs and their shapes
    guards = (first / "guards.txt").read_text()
    assert "L['x']" in guards and "(3, 4)" in guards
    aot = (first / "aot_graphs.txt").read_text()
    assert "joint graph" in aot and "forward graph" in aot and "backward graph" in aot
    assert "aten.mm" in (first / "forward_0.aten.txt").read_text()
    assert "aten.mm" in (first / "backward_0.aten.txt").read_text()
    assert "Reduction" in (first / "forward_0.loop_ir.txt").read_text()
    assert "def " in (first / "forward_0.wrapper.py").read_text()
    assert "fuse" in (first / "forward_0.fusion.txt").read_text()
    broken = [e for e in index if e.get("ends_with")]
    assert broken and broken[0]["ends_with"].startswith("graph break at ")
    assert "test_debug_dir.py" in broken[0]["ends_with"]
    assert all("_breaking" in e["where"] for e in used)
    md = (run / "index.md").read_text()
    assert all(e["folder"] in md for e in index) and "forward_0.*" in md


def test_inference_graph_and_eager_backend(tmp_path):
    danlu.reset()
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()).eval()
    x = torch.randn(2, 8)
    with danlu.config.patch(debug_dir=str(tmp_path)), torch.no_grad():
        assert same(model(x), danlu.compile(model)(x))
        assert same(model(x), danlu.compile(model, backend="eager")(x))
    run = _run_dir(tmp_path)
    index = json.loads((run / "index.json").read_text())
    inductor, eager = index
    assert "inference_0.loop_ir.txt" in inductor["files"]
    assert not any(f.startswith(("forward", "backward")) for f in inductor["files"])
    assert eager["backend"] == "eager"
    assert set(eager["files"]) == {"captured_graph.py", "captured_graph.txt", "guards.txt"}


def test_nothing_is_written_without_a_debug_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("DANLU_DEBUG_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    danlu.reset()
    with danlu.config.patch(debug_dir=None):
        f = danlu.compile(lambda x: x.sin() + 1)
        x = torch.randn(4)
        assert same(f(x), x.sin() + 1)
        # the normal path hands capture the backend's own callable (no debug wrapper)
        assert danlu.CompileStats.current().graphs[0].debug_folder is None
    assert list(tmp_path.iterdir()) == []
