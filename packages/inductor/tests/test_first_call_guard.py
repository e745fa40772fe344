"""FirstCallGuard: a graph whose Triton kernels fail on their first call runs eagerly from
then on, and its outputs keep the layouts the compiled code would have returned them with
(a backward compiled for saved values' layouts reads them without checking)."""

from __future__ import annotations

import torch

from danlu_inductor.pipeline.compiled import FirstCallGuard
from danlu_inductor.runtime import KernelLaunchError


class _Graph(torch.nn.Module):
    def forward(self, x):
        return (x * 2, (x + 1).t(), 3)


def _failing_call(args):
    raise KernelLaunchError("kernel0 failed to launch")


def test_eager_fallback_returns_the_planned_layouts():
    x = torch.randn(5, 7)
    # planned: the first output transposed in memory, the second contiguous (eager gives the
    # opposite), the int untouched
    layouts = [((5, 7), (1, 5)), ((7, 5), (5, 1)), None]
    guard = FirstCallGuard(_failing_call, _Graph(), {}, output_layouts=layouts)
    for _ in range(2):  # the failing first call, then the eager path
        a, b, c = guard([x])
        assert (a.shape, a.stride()) == layouts[0] and (b.shape, b.stride()) == layouts[1]
        torch.testing.assert_close(a, x * 2)
        torch.testing.assert_close(b, (x + 1).t())
        assert c == 3
    assert guard.eager and "kernel0" in guard.report["fallback_reason"]


def test_eager_fallback_without_planned_layouts_returns_eagers():
    x = torch.randn(5, 7)
    guard = FirstCallGuard(_failing_call, _Graph(), {})
    a, b, _ = guard([x])
    assert b.stride() == (1, 7)  # eager's transposed view, as it is


def test_the_first_call_records_its_time_once():
    calls = []

    def call(args):
        calls.append(len(args))
        return [args[0] * 2]

    report = {}
    guard = FirstCallGuard(call, _Graph(), report)
    x = torch.randn(3)
    guard([x])
    first = report["first_run_s"]
    assert isinstance(first, float) and first >= 0
    guard([x])
    assert report["first_run_s"] == first and calls == [1, 1]  # later calls leave it


class _Update(torch.nn.Module):
    def forward(self, x, stat):
        return (x - stat, stat * 0.9 + x.mean(0) * 0.1)


def test_inputs_written_before_a_failing_kernel_are_restored_for_the_eager_rerun():
    # the wrapper computes the second output into `stat` (in place) and then a later kernel
    # fails: the eager rerun must start from the caller's old statistic, not the half-updated
    def half_written(args):
        x, stat = args
        stat.mul_(0.9).add_(x.mean(0) * 0.1)  # what the in-place kernel did
        raise KernelLaunchError("kernel3 failed to launch")

    x, stat = torch.randn(6, 4), torch.randn(4)
    old = stat.clone()
    guard = FirstCallGuard(half_written, _Update(), {}, written=(1,))
    centered, new = guard([x, stat])
    torch.testing.assert_close(stat, old)  # the caller's tensor as it was; aotautograd writes
    torch.testing.assert_close(new, old * 0.9 + x.mean(0) * 0.1)  # the new value back itself
    torch.testing.assert_close(centered, x - old)
