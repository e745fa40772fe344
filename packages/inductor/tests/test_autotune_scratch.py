"""Autotuning times each candidate launch config on copies of the kernel's arguments. The
copies must keep the arguments' exact layout: a kernel indexes with the strides it was built
for, so a dense clone of a sliced view (fewer bytes) is read and written past its end."""

from __future__ import annotations

import pytest
import torch

from danlu_inductor.codegen.triton import backend
from danlu_inductor.codegen.triton.heuristics import Config


def _views():
    base = torch.arange(4 * 10, dtype=torch.float32).view(4, 10)
    return {
        "slice with gaps": base[:, :6],
        "offset slice": base[1:, 3:9],
        "transposed slice": base.t()[2:8],
        "expanded (overlapping)": torch.arange(5.0).view(5, 1).expand(5, 7),
        "every other row": base[::2],
        "size-1 dim with any stride": base[:1],
        "contiguous": base.clone(),
        "empty": base[:, :0],
    }


@pytest.mark.parametrize("name", list(_views()))
def test_scratch_copy_keeps_layout_and_values_in_new_memory(name):
    t = _views()[name]
    c = backend.scratch_copy(t)
    assert c.shape == t.shape and c.stride() == t.stride(), (c.stride(), t.stride())
    torch.testing.assert_close(c, t)
    if t.numel():
        assert c.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
        # the copy spans every element the kernel may address from its data pointer
        extent = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
        assert c.untyped_storage().nbytes() >= extent * t.element_size()


def test_scratch_copy_passes_non_tensors_through():
    assert backend.scratch_copy(7) == 7 and backend.scratch_copy(None) is None


def test_autotune_launches_on_layout_preserving_copies(monkeypatch):
    seen = []
    launcher = backend.TritonLauncher.__new__(backend.TritonLauncher)
    launcher.configs = [Config(16, None, 1), Config(32, None, 1)]

    def fake_launch(cfg, args):
        seen.append([(a.stride(), a.untyped_storage().nbytes()) for a in args])

    monkeypatch.setattr(launcher, "_launch", fake_launch, raising=False)
    monkeypatch.setattr(backend, "_time_launches", lambda launch, **_: launch() or 1.0)
    sliced = torch.randn(8, 12)[:, :5]
    out = torch.empty(8, 5)
    launcher._autotune([sliced, out])
    assert seen and all(s[0][0] == sliced.stride() and s[0][1] >= (7 * 12 + 5) * 4 for s in seen), (
        seen
    )


def test_small_working_sets_are_timed_with_the_l2_evicted():
    """Tensors that fit the L2 cache twice over are timed each launch after a buffer twice
    the L2's size was zeroed; larger ones, and CPU tensors, back to back."""
    import pytest
    import torch

    from danlu_inductor.codegen.triton.backend import _time_launches, l2_flush_buffer

    assert l2_flush_buffer([torch.ones(4), 3]) is None
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    small = torch.ones(1024, device="cuda")
    flush = l2_flush_buffer([small])
    l2 = torch.cuda.get_device_properties(small.device).L2_cache_size
    assert flush is not None and flush.numel() * 4 == 2 * l2
    big = torch.empty(3 * l2 // 4, dtype=torch.int32, device="cuda")
    assert l2_flush_buffer([big]) is None
    ms = _time_launches(lambda: small.add_(1), flush=flush)
    assert 0 < ms < 10
