"""`danlu.compile(..., dynamic=)` and `danlu.mark_dynamic`/`mark_static` through the eager and
aot_eager backends: compile counts, correctness against eager, backward."""

import copy

import pytest
import torch

import danlu
from danlu.testing import counting_backend, same


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.ln = torch.nn.LayerNorm(8)

    def forward(self, x):
        b, t, c = x.shape
        y = self.ln(self.fc(x)).reshape(b * t, c).softmax(-1)
        return y.view(b, t, c)[:, : t - 1].sum(1) * t


def _step_matches(compiled, model, ref, *args):
    """One training step of ``compiled`` (over ``model``) and of its eager twin ``ref``: same
    outputs, same parameter gradients. Where fp32 results differ by more than the tolerances,
    the float64 twin decides: the loss squares sums over many positions, so gradients reach
    ~1e5 and an element that cancels to near zero carries fp32 rounding far above atol."""
    ref64 = copy.deepcopy(ref).double()
    args64 = [a.double() if isinstance(a, torch.Tensor) else a for a in args]
    out, exp, exp64 = compiled(*args), ref(*args), ref64(*args64)
    assert same(exp, out, exp64)
    out.square().sum().backward()
    exp.square().sum().backward()
    exp64.square().sum().backward()
    for p, q, q64 in zip(model.parameters(), ref.parameters(), ref64.parameters()):
        assert same(q.grad, p.grad, q64.grad)
        p.grad = q.grad = None


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_automatic_dynamic_compiles_twice_and_trains(backend):
    torch.manual_seed(0)
    ref = Net()
    model = Net()
    model.load_state_dict(ref.state_dict())
    calls, be = counting_backend(backend)
    compiled = danlu.compile(model, backend=be)
    for b, t in [(2, 3), (3, 5), (4, 9), (2, 12), (5, 7), (3, 4), (6, 2), (2, 20), (7, 6), (4, 4)]:
        x = torch.randn(t, b, 8).transpose(0, 1)  # non-contiguous
        _step_matches(compiled, model, ref, x)
    assert len(calls) == 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("dynamic, compiles", [(True, 1), (False, 3)])
def test_dynamic_true_and_false(backend, dynamic, compiles):
    model = Net().eval()
    calls, be = counting_backend(backend)
    compiled = danlu.compile(model, backend=be, dynamic=dynamic)
    with torch.no_grad():
        for t in (3, 6, 11):
            x = torch.randn(2, t, 8)
            assert same(model(x), compiled(x))
    assert len(calls) == compiles


def test_mark_dynamic_is_reexported():
    calls, be = counting_backend("eager")
    compiled = danlu.compile(lambda x: x.cumsum(0) * x.shape[0], backend=be)
    x = torch.randn(5, 3)
    danlu.mark_dynamic(x, 0)
    assert same(compiled(x), x.cumsum(0) * 5)
    y = torch.randn(9, 3)
    assert same(compiled(y), y.cumsum(0) * 9)
    assert len(calls) == 1
    z = torch.randn(4, 3)
    danlu.mark_static(z, 0)
    calls2, be2 = counting_backend("eager")
    compiled2 = danlu.compile(lambda x: x + 1, backend=be2, dynamic=True)
    compiled2(z)
    ph = next(n for n in calls2[0].graph.nodes if n.op == "placeholder")
    assert not isinstance(ph.meta["val"].shape[0], torch.SymInt)
    assert isinstance(ph.meta["val"].shape[1], torch.SymInt)


def test_logs_and_capture_say_which_size_changed():
    import logging

    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logger = logging.getLogger("danlu_dynamo.recompiles")
    handler, level = Keep(), logger.level
    logger.addHandler(handler)  # direct: other tests may stop this logger propagating
    logger.setLevel(logging.INFO)
    try:
        compiled = danlu.compile(lambda x: x.relu(), backend="eager")
        compiled(torch.randn(3, 4))
        compiled(torch.randn(6, 4))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert any("L['x'].size(0): 3 -> 6, made dynamic" in r for r in records)
    capture = danlu.CompileStats.current().captures[-1]
    assert any("made dynamic" in r for r in capture.recompiles)


class Windowed(torch.nn.Module):
    """Reads the first ``n`` positions: ``n`` is a Python int argument."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.ln = torch.nn.LayerNorm(8)

    def forward(self, x, n):
        return self.ln(self.fc(x[:, :n])).sum(1) * n


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_int_argument_made_dynamic_compiles_twice_and_trains(backend):
    torch.manual_seed(torch.seed() % 2**31)
    ref = Windowed()
    model = Windowed()
    model.load_state_dict(ref.state_dict())
    calls, be = counting_backend(backend)
    compiled = danlu.compile(model, backend=be)
    x = torch.randn(24, 3, 8).transpose(0, 1)  # non-contiguous, 24 positions
    for n in (3, 5, 9, 24, 2, 17, 5):
        _step_matches(compiled, model, ref, x, n)
    assert len(calls) == 2
