"""The progress line: shown on a terminal for a compile that runs long, rewritten in place,
erased at the end; never on a stream that is not a terminal, nor with the option off."""

import io
import time

import torch

import danlu
from danlu import progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_long_compile_shows_then_erases_one_line(monkeypatch):
    monkeypatch.setattr(progress, "AFTER_S", 0.05)
    monkeypatch.setattr(progress, "EVERY_S", 0.02)
    out = Terminal()
    with progress.progress(2, stream=out):
        progress.phase("lowering")
        time.sleep(0.2)
    text = out.getvalue()
    assert "[danlu] compiling graph 2: lowering," in text and text.count("\r") >= 3
    assert text.endswith("\r")  # erased: the last write blanks the line and returns
    assert "\n" not in text


def test_quiet_when_short_not_a_terminal_or_off(monkeypatch):
    monkeypatch.setattr(progress, "AFTER_S", 0.05)
    short, pipe, off = Terminal(), io.StringIO(), Terminal()
    with progress.progress(0, stream=short):
        pass  # faster than AFTER_S
    with progress.progress(0, stream=pipe):
        time.sleep(0.1)
    with danlu.config.patch(progress=False), progress.progress(0, stream=off):
        time.sleep(0.1)
    assert short.getvalue() == pipe.getvalue() == off.getvalue() == ""


def test_compiles_announce_their_phases(monkeypatch):
    seen = []
    monkeypatch.setattr(progress, "phase", seen.append)
    import danlu.backends as backends

    monkeypatch.setattr(backends, "phase", seen.append)
    danlu.reset()
    danlu.compile(lambda x: (x.sin() * 2).sum())(torch.randn(3, requires_grad=True))
    assert "autograd" in seen and any(p.startswith("inductor") for p in seen)
