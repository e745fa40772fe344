"""State a compiled program must leave as eager does, through backends that trace the captured
graph (aot_eager, inductor): autograd state of new tensors, the grad mode a program sets,
replaced forwards, torch-function modes, and class-level torch functions."""

import pytest
import torch

import danlu

BACKENDS = ["aot_eager", "inductor"]


@pytest.fixture(autouse=True)
def _grad_mode_back():
    yield
    torch.set_grad_enabled(True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_requires_grad_on_a_tensor_made_inside_gives_a_leaf(backend):
    def f(w):
        return torch.zeros(2).requires_grad_(), w * 2

    for input_grad in (False, True):
        p, _ = danlu.compile(f, backend=backend)(torch.randn(2, requires_grad=input_grad))
        assert p.requires_grad and p.is_leaf
        (p * 3).sum().backward()
        torch.testing.assert_close(p.grad, torch.full((2,), 3.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_mode_set_by_the_program_stays_set(backend):
    def f(x):
        torch.set_grad_enabled(False)
        return x * 2

    x = torch.randn(2, requires_grad=True)
    out = danlu.compile(f, backend=backend)(x)
    assert not torch.is_grad_enabled() and not out.requires_grad


@pytest.mark.parametrize("backend", BACKENDS)
def test_forward_replaced_on_a_submodule_instance(backend):
    torch.manual_seed(torch.seed() % 2**31)
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    compiled = danlu.compile(m, backend=backend)
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(x), m(x))
    m[1].forward = lambda t: t * 100
    torch.testing.assert_close(compiled(x), m(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_function_mode_entered_after_compiling(backend):
    from torch.overrides import TorchFunctionMode

    class ScaleSin(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            return out * 100 if func is torch.sin else out

    def f(x):
        return torch.sin(x) + x.cos()

    compiled = danlu.compile(f, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), f(x))
    with ScaleSin():
        want = f(x)
    with ScaleSin():
        got = compiled(x)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("backend", ["eager", *BACKENDS])
def test_static_method_of_a_torch_class(backend):
    def f(x):
        return x + torch.nn.Transformer.generate_square_subsequent_mask(x.shape[0])

    x = torch.randn(4, 4)
    torch.testing.assert_close(danlu.compile(f, backend=backend)(x), f(x))


@pytest.mark.parametrize("backend", ["eager", *BACKENDS])
def test_activation_checkpointing_inside(backend):
    import functools

    import torch.utils.checkpoint as cp

    torch.manual_seed(torch.seed() % 2**31)
    lin = torch.nn.Linear(4, 4)
    ckpt = functools.partial(cp.checkpoint, use_reentrant=False)  # as transformers calls it

    def f(x):
        y = cp.checkpoint(lambda t: lin(t).relu(), x, use_reentrant=False)
        return ckpt(lin, y).sum()

    x = torch.randn(3, 4, requires_grad=True)
    danlu.compile(f, backend=backend)(x).backward()
    got = (x.grad.clone(), lin.weight.grad.clone())
    x.grad = lin.weight.grad = None
    f(x).backward()
    torch.testing.assert_close(got[0], x.grad)
    torch.testing.assert_close(got[1], lin.weight.grad)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_running_statistics_and_their_versions(backend):
    # the inductor backend computes the new running statistics into the module's buffers
    # (no allocation and copy back); values, the step counter and the buffers' version
    # counters must come out as eager's, in training and in a no-grad call in train mode
    import copy

    torch.manual_seed(torch.seed() % 2**31)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 6, 3), torch.nn.BatchNorm2d(6), torch.nn.ReLU(), torch.nn.BatchNorm2d(6)
    ).train()
    ref = copy.deepcopy(net)
    compiled = danlu.compile(net, backend=backend)
    buffers = dict(net.named_buffers())
    versions = {n: b._version for n, b in buffers.items()}
    for step in range(3):
        x = torch.randn(4, 3, 9, 9)
        if step == 2:
            with torch.no_grad():
                torch.testing.assert_close(compiled(x), ref(x), rtol=1e-4, atol=1e-4)
        else:
            out, want = compiled(x), ref(x)
            torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
            out.square().sum().backward()
            want.square().sum().backward()
    for name, b in ref.named_buffers():
        torch.testing.assert_close(buffers[name], b, rtol=1e-5, atol=1e-5)
        assert buffers[name]._version > versions[name], name  # written, as eager's add_
    for p, q in zip(net.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-3)
