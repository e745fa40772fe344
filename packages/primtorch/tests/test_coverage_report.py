"""The coverage report classifies ops correctly and reads/writes sweep results."""

import warnings

import torch

from danlu_primtorch.coverage import report
from danlu_primtorch.coverage.__main__ import main
from danlu_primtorch.coverage.sweep import sweep

aten = torch.ops.aten


def test_classify():
    assert report.classify(aten.add.Tensor) == "canonical -> prims"
    assert report.classify(aten.gelu.default) == "decomposed"
    assert report.classify(aten.add_.Tensor) == "mutating (functionalize)"
    assert report.classify(aten.nonzero.default) == "not handled"


def test_counts_reach_the_target():
    c = report.counts()
    assert c["packets decomposed at either level"] >= 300, c
    assert c["canonical packets decomposed to prims"] <= c["canonical packets"]


def test_cli_reads_a_saved_sweep(tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db

        import danlu_primtorch

        picked = [o for o in op_db if o.name in ("nn.functional.gelu", "nn.functional.softplus")]
        result = sweep(danlu_primtorch.decomposition_table(), picked, samples_per_dtype=2)
    path = report.save(result, tmp_path / "cov.json")
    assert main(["--results", str(path), "--status", "decomposed"]) == 0
    out = capsys.readouterr().out
    assert "aten.gelu.default" in out and "OpInfo checks of decompositions" in out
    assert "aten.add.Tensor " not in out  # filtered to the decomposed status
    gelu = [line for line in out.splitlines() if line.startswith("aten.gelu.default ")][0]
    passed, total = gelu.split()[-1].split("/")
    assert int(total) > 0 and passed == total


def test_cli_without_results_says_how_to_get_them(tmp_path, capsys):
    assert main(["--results", str(tmp_path / "none.json"), "--summary"]) == 0
    out = capsys.readouterr().out
    assert "run with --sweep" in out and "packets decomposed to canonical" in out
