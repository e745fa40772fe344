"""Shared checks: run a function eagerly and compiled on copies of the same inputs and compare
outputs, gradients and input writes."""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_map

import danlu_aotautograd as da


def clone_inputs(args):
    def c(x):
        if isinstance(x, torch.Tensor):
            y = x.detach().clone()
            if x.stride() != y.stride():  # keep non-contiguous layouts as they are
                y = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype).copy_(x.detach())
            return y.requires_grad_(x.requires_grad)
        return x

    return tree_map(c, args)


def loss_of(out):
    flat, _ = tree_flatten(out)
    total = 0
    for o in flat:
        if isinstance(o, torch.Tensor) and o.requires_grad:
            total = total + (o * torch.randn_like(o).abs()).sum()
    return total


def check(fn, args, partition_fn=da.min_cut_partition, atol=1e-5, rtol=1e-5, **options):
    """Outputs, gradients and written inputs of aot_function(fn) equal eager ones."""
    eager_args = clone_inputs(args)
    aot_args = clone_inputs(args)
    compiled = da.aot_function(fn, da.run_graph, partition_fn=partition_fn, **options)
    seed = torch.randint(0, 2**31, ()).item()
    torch.manual_seed(seed)
    expected = fn(*eager_args)
    torch.manual_seed(seed)
    actual = compiled(*aot_args)
    exp_flat, exp_spec = tree_flatten(expected)
    act_flat, act_spec = tree_flatten(actual)
    assert exp_spec == act_spec
    for e, a in zip(exp_flat, act_flat):
        if isinstance(e, torch.Tensor):
            assert a.shape == e.shape and a.dtype == e.dtype
            assert a.requires_grad == e.requires_grad
            torch.testing.assert_close(a, e, atol=atol, rtol=rtol)
        else:
            assert a == e
    torch.manual_seed(seed + 1)
    le = loss_of(expected)
    torch.manual_seed(seed + 1)
    la = loss_of(actual)
    if isinstance(le, torch.Tensor):
        le.backward()
        la.backward()
    for e, a in zip(tree_flatten(eager_args)[0], tree_flatten(aot_args)[0]):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(a, e, atol=atol, rtol=rtol)  # writes to inputs
            if e.requires_grad:
                if e.grad is None:
                    assert a.grad is None
                else:
                    torch.testing.assert_close(a.grad, e.grad, atol=atol, rtol=rtol)
    return compiled, actual, expected


def capturing_compilers():
    """(graphs, compiler): ``compiler(name)`` is a graph compiler that keeps the graph it is
    handed in ``graphs[name]`` and runs it as it is."""
    graphs = {}

    def compiler(name):
        def compile_graph(gm, example_inputs):
            graphs[name] = gm
            return gm

        return compile_graph

    return graphs, compiler


def count_calls(gm, target) -> int:
    """How many nodes of ``gm`` call ``target``."""
    return sum(1 for n in gm.graph.nodes if n.target is target)


def aot_module_recording_partitions(model):
    """``aot_module(model)`` with the min-cut partitioner and eager compilers, and the list
    the partitions it makes are appended to (one per compiled graph)."""
    from danlu_aotautograd.partition import min_cut_partition

    partitions = []

    def partition_fn(joint, *, num_fw_outputs):
        partitions.append(min_cut_partition(joint, num_fw_outputs=num_fw_outputs))
        return partitions[-1]

    return da.aot_module(model, lambda gm, _: gm, partition_fn=partition_fn), partitions


def bf16_step_beside_eager(model_cls, x: torch.Tensor) -> list:
    """One bf16-autocast training step of ``model_cls()`` through the recording min-cut
    partitioner, beside an eager copy with the same weights: the loss, the input's and the
    parameters' gradients must match. Returns the partitions made."""
    torch.manual_seed(torch.randint(0, 2**31 - 1, ()).item())
    model, ref = model_cls(), model_cls()
    ref.load_state_dict(model.state_dict())
    compiled, partitions = aot_module_recording_partitions(model)
    x = x.requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, loss_ref = compiled(x), ref(x_ref)
    loss.backward()
    loss_ref.backward()
    torch.testing.assert_close(loss, loss_ref, rtol=1e-6, atol=0)
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-5, atol=1e-7)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    return partitions


def matmul_step_beside_eager(compiled, fn, x, w) -> None:
    """A forward and backward of ``compiled(x, w)`` against ``fn``'s eager ones on copies: the
    output and both gradients."""
    x = x.detach().requires_grad_()
    w_c = w.clone().requires_grad_()
    out = compiled(x, w_c)
    x_r, w_r = x.detach().requires_grad_(), w.clone().requires_grad_()
    torch.testing.assert_close(out, fn(x_r, w_r))
    out.sum().backward()
    fn(x_r, w_r).sum().backward()
    torch.testing.assert_close(x.grad, x_r.grad)
    torch.testing.assert_close(w_c.grad, w_r.grad)
