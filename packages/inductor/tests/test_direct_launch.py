"""The bound direct launch (``DirectLaunch.bind``) without a GPU: a stand-in for Triton's
compiled-kernel launcher records what it is called with. On a GPU, ``triton_wrapper_cases``'
``direct_launch`` case runs the real one across alignments."""

from __future__ import annotations

import contextlib

import torch

from danlu_inductor.codegen.triton.backend import DirectLaunch


class _Kernel:
    function, packed_metadata = "function", "packed"

    def __init__(self):
        self.calls = []

    def run(self, *a):
        self.calls.append(a)


def _direct(kernel, checks):
    return DirectLaunch(kernel, (64, 8), checks, (lambda device: f"stream{device}", 0))


def test_bound_launch_passes_grid_stream_arguments_sizes_and_constants():
    k = _Kernel()
    x = torch.zeros(64)  # data pointers of fresh tensors are 16-byte aligned
    slow = []
    go = _direct(k, ((0,), (), (1,))).bind((5,), (320,), 1, lambda *a: slow.append(a))
    go(x)
    assert k.calls == [(5, 1, 1, "stream0", "function", "packed", None, None, None, x, 320, 64, 8)]
    assert not slow


def test_an_argument_that_breaks_an_assumption_takes_the_slow_path():
    k = _Kernel()
    base = torch.zeros(65)
    slow = []
    go = _direct(k, ((0,), (1,), ())).bind((2, 3), (), 2, lambda *a: slow.append(a))
    go(base[:64], 1)
    assert len(k.calls) == 1 and k.calls[0][:3] == (2, 3, 1)
    go(base[1:], 1)  # 4 bytes off: no longer 16-byte aligned
    go(base[:64], 2)  # was 1 when compiled
    assert len(k.calls) == 1 and len(slow) == 2


def test_static_sizes_that_break_an_assumption_give_no_bound_launch():
    # a size that was a multiple of 16 when compiled but is not now: never bound
    assert _direct(_Kernel(), ((), (), (1,))).bind((1,), (33,), 1, None) is None
    assert _direct(_Kernel(), ((), (1,), ())).bind((1,), (2,), 1, None) is None


def _real_launcher(calls):
    """Triton's own CUDA launcher class, its fields set by hand (no GPU, no compiled kernel),
    with a C launch function that records what it gets."""
    from triton.backends.nvidia.driver import CudaLauncher

    run = object.__new__(CudaLauncher)
    run.global_scratch_size = run.profile_scratch_size = 0
    run.global_scratch_align = run.profile_scratch_align = 1
    run.gsan_enabled, run.num_ctas = False, 1
    run.launch_cooperative_grid, run.launch_pdl = False, True
    run.arg_annotations, run.kernel_signature = "annotations", "signature"
    run.launch = lambda *a: calls.append(a)
    return run


class _NoDevice:  # what a launcher's __call__ may ask of the active driver, on no GPU
    def allocate_default_profile_scratch(self, *a):
        raise AssertionError("no profile scratch for a kernel that needs none")


@contextlib.contextmanager
def _stub_driver():
    import triton

    config = triton.runtime.driver
    before = config._active  # None until a driver was asked for (none on a machine without GPU)
    config.set_active(_NoDevice())
    try:
        yield
    finally:
        config.set_active(before)


def test_bound_launch_calls_tritons_c_launch_as_its_launcher_would():
    # the probe finds the installed Triton's layout; the bound launch then calls the C
    # function directly, with exactly the arguments the launcher's __call__ passes
    from danlu_inductor.codegen.triton.launch import launch_call, launch_protocol

    calls = []
    run = _real_launcher(calls)
    k = _Kernel()
    k.run = run
    x = torch.zeros(64)
    with _stub_driver():
        assert launch_protocol(run, "function", "packed") in (
            "scratch_then_args",
            "annotated_tuple",
        )
        assert launch_call(run, "function", "packed")[0] is run.launch  # the C function itself
        go = _direct(k, ((0,), (), ())).bind((7, 2), (320,), 1, None)
        assert not calls  # the probe recorded on a copy
        go(x)
        ours = calls.pop()
        run(7, 2, 1, "stream0", "function", "packed", None, None, None, x, 320, 64, 8)
    assert ours == calls.pop()


def test_a_launcher_whose_layout_is_not_confirmed_is_called_itself():
    from danlu_inductor.codegen.triton.launch import launch_call, launch_protocol

    assert launch_protocol(_Kernel().run) is None  # a stand-in: its probe records nothing
    run = _real_launcher([])
    run.global_scratch_size = 128  # a kernel that needs scratch: __call__ allocates it
    assert launch_call(run, "function", "packed")[0] is run

    class _Reordering:  # a launcher that hands on its arguments in an order we do not know
        global_scratch_size = profile_scratch_size = 0

        def __init__(self):
            self.launch = lambda *a: None

        def __call__(self, gx, gy, gz, stream, function, *args):
            self.launch(stream, gx, gy, gz, function, *args)

    odd = _Reordering()
    assert launch_protocol(odd, "function", "packed") is None
    assert launch_call(odd, "function", "packed")[0] is odd


def test_integers_triton_does_not_specialize_on_are_not_checked():
    """A symbolic graph's size arguments are ``do_not_specialize``: their first value's
    remainder mod 16 (or being 1) says nothing about what the kernel was compiled for."""
    x = torch.zeros(64)
    values = [x, 32, 1, 48]
    assert DirectLaunch.assumptions(values) == ((0,), (2,), (1, 3))
    assert DirectLaunch.assumptions(values, frozenset({1, 2})) == ((0,), (), (3,))
    k = _Kernel()
    d = _direct(k, DirectLaunch.assumptions(values, frozenset({1, 2})))
    assert d.matches([x, 33, 5], (48,))  # other sizes: still the direct launch
    assert not d.matches([x, 33, 5], (40,))  # a specialised one that changed


def test_symbolic_bound_launch_takes_each_calls_grid_and_sizes():
    """A symbolic kernel's bound launch: the grid and ``xnumel`` come from the call's own
    size arguments (``shape``), the tensors' alignment is still checked, an empty grid
    launches nothing."""
    k = _Kernel()
    x = torch.zeros(64)
    slow = []

    def shape(args):  # one size argument s0; xnumel = 4 * s0, 8 per program
        n = 4 * args[-1]
        return ((n + 7) // 8,), (n,)

    go = _direct(k, ((0,), (), ())).bind_symbolic(shape, 2, lambda *a: slow.append(a))
    go(x, 5)
    go(x, 16)
    go(x, 0)  # empty: no launch
    between = ("function", "packed", None, None, None)
    assert k.calls == [(3, 1, 1, "stream0", *between, x, 5, 20, 64, 8)] + [
        (8, 1, 1, "stream0", *between, x, 16, 64, 64, 8)
    ]
    go(torch.zeros(65)[1:], 5)  # not 16-byte aligned: the slow path
    assert len(k.calls) == 2 and len(slow) == 1


def test_symbolic_bound_launch_refuses_sizes_triton_specialised_on():
    # xnumel (position 2 of [x, s0, xnumel]) was a multiple of 16 and Triton was not told
    # to leave it alone: each call's value would need checking, so no bound launch
    assert _direct(_Kernel(), ((0,), (), (2,))).bind_symbolic(None, 2, None) is None
    assert _direct(_Kernel(), ((0,), (), ())).bind_symbolic(None, 2, None) is not None


def test_a_symbolic_kernel_binds_its_launch_after_the_first_calls():
    """TritonLauncher of a symbolic kernel: after the config's first launch the later calls
    go through the bound launch, with the grid of their own sizes."""
    from danlu_inductor.codegen.triton.backend import Config, TritonLauncher

    def fn():
        pass

    fn.danlu_meta = {
        "kind": "pointwise",
        "xnumel": None,
        "rnumel": 1,
        "params": ["in_ptr0", "s0"],
        "uses_err": False,
        "signature": {"in_ptr0": "*fp32", "s0": "i64", "xnumel": "i32", "XBLOCK": "constexpr"},
        "size_args": ["s0"],
        "numel_exprs": ["3 * s0", "1"],
    }
    launcher = TritonLauncher(fn, autotune=False)
    cfg = launcher.config = Config(64, 1, 4)
    k = _Kernel()
    launcher._direct[cfg] = _direct(k, ((0,), (), ()))
    x = torch.zeros(64)
    launcher(x, 100)  # the config's launch, then the bound launch is made
    assert launcher._go and len(k.calls) == 1
    launcher(x, 7)
    launcher(x, 1000)
    grids = [c[:3] for c in k.calls]
    sizes = [c[-3] for c in k.calls]  # xnumel, before the two constants
    assert grids == [(5, 1, 1), (1, 1, 1), (47, 1, 1)] and sizes == [300, 21, 3000]
