"""The segment path entered through the C frame hook (``config.capture_path = "segments"``
with ``config.use_frame_hook``): user frames started by library code inside a compiled call
are captured too; results stay exact."""

import sys
from pathlib import Path

import pytest
import torch

import danlu_dynamo
from danlu_dynamo import config

sys.path.insert(0, str(Path(__file__).parent))

import _programs_a  # noqa: E402
import _programs_b  # noqa: E402
from _programs_common import check_program  # noqa: E402


@pytest.fixture
def frame_hook():
    prev = config.use_frame_hook, config.capture_path
    config.use_frame_hook, config.capture_path = True, "segments"
    try:
        yield
    finally:
        config.use_frame_hook, config.capture_path = prev


def _helper_with_print(t):
    print("helper")
    return t * 2


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return _helper_with_print(self.lin(x)).relu()


def test_module_with_forward_hook_is_captured_through_the_hook(frame_hook, capsys):
    torch.manual_seed(0)
    net = _Net()
    net.register_forward_hook(lambda mod, inp, out: out + 1)

    def f(x, *rest, k=2, **kw):
        return net(x) * k + sum(rest) + kw.get("z", 0)

    x = torch.randn(2, 4)
    ref = f(x, 1.0, k=3, z=5)
    opt = danlu_dynamo.optimize("eager")(f)
    for _ in range(2):
        assert torch.equal(opt(x, 1.0, k=3, z=5), ref)
    # the module has hooks, so the caller breaks at the call; torch's __call__ then starts
    # forward and the hook lambda as frames, which the frame hook hands to capture
    codes = {code.co_name for code in opt._capture_ctx.caches}
    assert {"f", "forward", "<lambda>", "_helper_with_print"} <= codes
    graphs = [s for s in opt._capture_ctx.records if s.num_ops > 0]
    assert len(graphs) >= 3
    assert capsys.readouterr().out.count("helper") == 3


def test_nonlocal_write_through_a_real_closure(frame_hook):
    def make():
        count = 0

        def f(x):
            nonlocal count
            count += 1
            return x * count

        return f, lambda: count

    f, get = make()
    opt = danlu_dynamo.optimize("eager")(f)
    x = torch.ones(2)
    assert torch.equal(opt(x), x) and torch.equal(opt(x), x * 2) and get() == 2


SUBSET = [c for i, c in enumerate(_programs_a.CASES + _programs_b.CASES) if i % 4 == 0]


@pytest.mark.parametrize("name,fn,factory", SUBSET, ids=[c[0] for c in SUBSET])
def test_program_through_frame_hook(frame_hook, name, fn, factory):
    check_program(fn, factory)
