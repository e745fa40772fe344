"""The demo compiles its model and trains references beside it (a short CPU run)."""

import runpy
import sys
import types

import pytest


def test_demo_compiles_its_model_and_trains_a_reference(monkeypatch, capsys):
    calls = []

    def compile_identity(model):
        calls.append(type(model).__name__)
        return model

    ref = types.SimpleNamespace(
        name="identity", compile=compile_identity, reset=lambda: calls.append("reset")
    )
    monkeypatch.setattr(sys, "argv", ["danlu.demo", "--steps", "3"])
    with pytest.raises(SystemExit) as done:
        runpy.run_module("danlu.demo", run_name="__main__", init_globals={"REFERENCES": (ref,)})
    out = capsys.readouterr().out
    assert done.value.code == 0, out
    assert calls == ["reset", "TinyGPT"]
    assert "(identity); largest relative difference" in out
    # danlu captured the model (a demo module skipped by the frame hook would show 0 here)
    assert "captured graphs: 1, graph breaks: 0" in out


def test_demo_without_references_has_no_reference_flag(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["danlu.demo", "--no-references"])
    with pytest.raises(SystemExit) as done:
        runpy.run_module("danlu.demo", run_name="__main__")
    assert done.value.code == 2  # argparse: unrecognized argument
