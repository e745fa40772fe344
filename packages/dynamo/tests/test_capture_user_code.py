"""Which frames capture treats as user code. Library code (torch, danlu's capture packages,
the standard library) is recognised by where those packages are, not by a path pattern: on
the GPU machine every installed package lives under ``/opt/torch/.venv``, and a
``"/torch/" in path`` test made transformers' frames library code, so after the first graph
break a model's frames ran uncaptured (GPT-2/BERT training steps: 0 graphs)."""

import importlib
import sys

import pytest
import torch

import danlu_dynamo
from danlu_dynamo.capture_context import is_user_code, library_dirs

MODULE = """
import torch


def helper(x):
    print("b", end="")  # a graph break inside an inlined call
    return x.exp() + 1


def model(x):
    y = x.sin() * 2
    z = helper(y)
    return z.cos() + y
"""


@pytest.fixture
def package_under_a_torch_dir(tmp_path, monkeypatch):
    """A package installed under a directory named ``torch`` (as in ``/opt/torch/.venv``)."""
    site = tmp_path / "opt" / "torch" / ".venv" / "site-packages"
    (site / "userpkg").mkdir(parents=True)
    (site / "userpkg" / "__init__.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(site))
    mod = importlib.import_module("userpkg")
    yield mod
    sys.modules.pop("userpkg", None)


def test_library_code_is_found_by_package_location(package_under_a_torch_dir):
    mod = package_under_a_torch_dir
    assert "/torch/" in mod.model.__code__.co_filename
    assert is_user_code(mod.model.__code__) and is_user_code(mod.helper.__code__)
    assert not is_user_code(torch.nn.functional.dropout.__code__)
    assert not is_user_code(torch.nn.Module.__call__.__code__)
    assert not is_user_code(is_user_code.__code__)
    assert not is_user_code(importlib.import_module.__code__)  # the standard library
    assert any(d.rstrip("/").endswith("torch") for d in library_dirs())


@pytest.mark.parametrize("seed", [0, 1])
def test_frames_after_a_break_are_captured_under_a_torch_dir(
    package_under_a_torch_dir, seed, capsys
):
    mod = package_under_a_torch_dir
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(seed))[:, ::2]
    expected = mod.model(x)
    got = danlu_dynamo.optimize("eager")(mod.model)(x)
    assert torch.equal(expected, got)
    e = danlu_dynamo.explain(mod.model)(x)
    # before the break, the callee's own frame after it, and the rest of the caller
    assert e.graph_count >= 2 and e.op_count >= 5, (e.graph_count, e.op_count)
    assert e.graph_break_count >= 1 and not e.eager_regions
    capsys.readouterr()
