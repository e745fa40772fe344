"""Long softmax rows in training graphs: saved as their input and a logsumexp per row, the output
recomputed in the backward (softmax_stats.py). Values and gradients against eager, what the
forward saves, and the rows left alone."""

import torch
import torch.nn.functional as F
from helpers import capturing_compilers, count_calls
from torch import nn

import danlu_aotautograd as da
from danlu_aotautograd.softmax_stats import MIN_ROW

aten = torch.ops.aten

VOCAB = MIN_ROW + 904  # an odd vocabulary past the threshold


def _saved_shapes(fw: torch.fx.GraphModule, num_outputs: int):
    out = next(n for n in fw.graph.nodes if n.op == "output").args[0]
    return [
        (tuple(n.meta["val"].shape), n.meta["val"].dtype)
        for n in out[num_outputs:]
        if isinstance(n, torch.fx.Node) and isinstance(n.meta.get("val"), torch.Tensor)
    ]


class Head(nn.Module):
    """A language model's head and loss: bf16 logits under autocast, cross entropy in fp32."""

    def __init__(self, width=32, vocab=VOCAB):
        super().__init__()
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, x, target):
        return F.cross_entropy(self.head(x).float().flatten(0, 1), target.flatten())


def test_cross_entropy_saves_bf16_logits_not_the_float_log_softmax():
    torch.manual_seed(torch.randint(0, 2**31 - 1, ()).item())
    model, ref = Head(), Head()
    ref.load_state_dict(model.state_dict())
    graphs, compiler = capturing_compilers()
    compiled = da.aot_module(model, compiler("fw"), bw_compiler=compiler("bw"))
    x = torch.randn(12, 3, 32).transpose(0, 1)  # non-contiguous
    target = torch.randint(0, VOCAB, (3, 12))
    target[0, 4] = -100  # ignored
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, loss_ref = compiled(x, target), ref(x, target)
    loss.backward()
    loss_ref.backward()
    torch.testing.assert_close(loss, loss_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(model.head.weight.grad, ref.head.weight.grad, rtol=2e-2, atol=1e-5)
    fw = graphs["fw"]
    assert count_calls(fw, aten._log_softmax.default) == 0
    assert count_calls(fw, aten.logsumexp.default) == 1
    saved = _saved_shapes(fw, 1)
    assert ((36, VOCAB), torch.float32) not in saved, saved
    assert any(shape[-1] == VOCAB and dtype == torch.bfloat16 for shape, dtype in saved), saved
    assert compiled.aot.stats["softmax_rows_split"] == 1


def _float64_case(fn, x, w):
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    graphs, compiler = capturing_compilers()
    compiled = da.aot_function(fn, compiler("fw"), bw_compiler=compiler("bw"))
    got = compiled(xc, wc)
    ref_x, ref_w = x.clone().requires_grad_(), w.clone().requires_grad_()
    ref = fn(ref_x, ref_w)
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12, equal_nan=True)
    grad = torch.randn_like(ref)
    got.backward(grad)
    ref.backward(grad)
    torch.testing.assert_close(xc.grad, ref_x.grad, rtol=1e-11, atol=1e-12, equal_nan=True)
    torch.testing.assert_close(wc.grad, ref_w.grad, rtol=1e-11, atol=1e-12, equal_nan=True)
    return compiled, graphs


def test_log_softmax_and_softmax_values_and_gradients_in_float64():
    torch.manual_seed(torch.randint(0, 2**31 - 1, ()).item())
    x = torch.randn(VOCAB, 6, dtype=torch.float64).t() * 4  # rows strided
    w = torch.randn(VOCAB, dtype=torch.float64)
    for op in (torch.log_softmax, torch.softmax):
        compiled, graphs = _float64_case(lambda a, b, op=op: (op(a * b, -1) * b).sum(-1), x, w)
        assert compiled.stats["softmax_rows_split"] == 1, op
        assert count_calls(graphs["fw"], aten.logsumexp.default) == 1


def test_rows_of_infinities_give_eagers_nans():
    """A row of -inf, a row holding +inf and a row holding NaN: eager's softmax and
    log-softmax are NaN over the whole row; a row with some -inf keeps its finite values."""
    x = torch.randn(5, VOCAB, dtype=torch.float64)
    x[0] = float("-inf")
    x[1, 7] = float("inf")
    x[2, 9] = float("nan")
    x[3, : VOCAB // 2] = float("-inf")
    w = torch.ones(VOCAB, dtype=torch.float64)
    for op in (torch.log_softmax, torch.softmax):
        compiled, _ = _float64_case(lambda a, b, op=op: op(a * b, -1), x, w)
        assert compiled.stats["softmax_rows_split"] == 1


def test_short_rows_and_inference_keep_the_op():
    w = torch.randn(100, requires_grad=True)
    graphs, compiler = capturing_compilers()
    compiled = da.aot_function(
        lambda a, b: torch.log_softmax(a * b, -1).sum(), compiler("fw"), bw_compiler=compiler("bw")
    )
    compiled(torch.randn(4, 100), w).backward()
    assert compiled.stats["softmax_rows_split"] == 0
    assert count_calls(graphs["fw"], aten._log_softmax.default) == 1

    graphs, compiler = capturing_compilers()
    compiled = da.aot_function(lambda a: torch.log_softmax(a, -1)[:, 0], compiler("fw"))
    with torch.no_grad():
        compiled(torch.randn(4, VOCAB))
    assert compiled.stats["softmax_rows_split"] == 0
    assert count_calls(graphs["fw"], aten._log_softmax.default) == 1
