"""Graph breaks that once made CPython 3.12 differ from 3.11 (each passes on both):

- a data-dependent branch inside a loop: resume functions on either side (3.11 took the segment
  path there, 3.12 ran the rest of the frame in plain Python);
- a break inside a comprehension: on 3.12+ the comprehension is inlined (PEP 709) and its
  cleanup handler is not a try block; the comprehension's container, passed to the resume
  function, must receive the appends made there (they were lost: a wrong result on 3.11);
- dict dataclasses (transformers' ``ModelOutput``) built in plain Python after a break: their
  ``__init__``/``__post_init__``/``__setattr__`` frames run as plain Python instead of breaking
  at every attribute store.

Results are compared with eager on fresh random inputs of several shapes."""

import collections
import dataclasses
import sys

import pytest
import torch

import danlu_dynamo
from danlu_dynamo import config
from danlu_dynamo.capture import frame_codegen

PY312 = sys.version_info >= (3, 12)


@pytest.fixture(autouse=True)
def bytecode_path():
    prev = config.capture_path
    config.capture_path = "bytecode"
    try:
        yield
    finally:
        config.capture_path = prev


def _inputs(seed, shape):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, 2, generator=g)[..., 0]  # non-contiguous
    assert not x.is_contiguous() or x.numel() <= 1
    return x


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _run_both(f, *args, calls=2):
    opt = danlu_dynamo.optimize("eager")(f)
    for _ in range(calls):
        assert _same(f(*args), opt(*args))
    return opt._capture_ctx


def _kinds(ctx):
    return [getattr(r, "kind", "segment") for r in ctx.records]


SHAPES = [(4,), (3, 5), (2, 3, 4)]


# ------------------------------------------------------------------ branches inside loops
def branch_compare_in_loop(x):
    for _i in range(3):
        x = x * 2
        if x.mean() > 0.5:  # 3.11: the COMPARE_OP is fused with this jump
            x = x - 1
    return x


def branch_truth_in_loop(x, n):
    i = 0
    while i < n:
        if x.max():
            x = x - 1
        else:
            x = x + 2
        i += 1
    return x * i


def branch_none_in_loop(xs, bias):
    out = []
    for t in xs:
        y = t.sin()
        if bias is not None:
            y = y + bias
        if y.sum() < 0:
            out.append(y * 3)
        else:
            out.append(y)
    return out


@pytest.mark.parametrize("seed", [11, 12, 13])
@pytest.mark.parametrize("shape", SHAPES)
def test_branch_inside_a_loop_resumes_on_either_side(seed, shape):
    x = _inputs(seed, shape)
    ctx = _run_both(branch_compare_in_loop, x)
    assert "resume" in _kinds(ctx) and not ctx.eager_reasons and not ctx.fallbacks
    ctx = _run_both(branch_truth_in_loop, x, 4)
    assert "resume" in _kinds(ctx) and not ctx.eager_reasons and not ctx.fallbacks
    xs = [_inputs(seed + k, shape) for k in range(4)]
    ctx = _run_both(branch_none_in_loop, xs, None)
    ctx = _run_both(branch_none_in_loop, xs, torch.randn(shape[-1]))
    assert "resume" in _kinds(ctx) and not ctx.eager_reasons and not ctx.fallbacks


def test_branch_inside_a_loop_breaks_once_per_iteration():
    x = torch.full((4,), 100.0)  # both sides are taken over the iterations
    e = danlu_dynamo.explain(branch_compare_in_loop)(x)
    assert e.graph_break_count == 3 and not e.eager_regions
    assert all("truth value of a tensor" in str(b.reason) for b in e.break_reasons)
    resumed = {
        frame_codegen.RESUME_OF[c][1]
        for c in frame_codegen.RESUME_OF
        if frame_codegen.RESUME_OF[c][0] is branch_compare_in_loop.__code__
    }
    assert len(resumed) >= 2  # a resume function per side of the branch


def _deep(n, fn, *args):
    """Call ``fn`` with more than MAX_RESUME_NESTING frames below it."""
    return fn(*args) if n == 0 else _deep(n - 1, fn, *args)


def print_in_loop(x, n):
    for i in range(n):
        x = x * 1.5
        print(i, end="")
        x = x + i
    return x


@pytest.mark.parametrize("seed", [21, 22])
def test_break_inside_a_loop_deep_in_the_stack_continues_in_plain_python(seed, capsys):
    depth = frame_codegen.MAX_RESUME_NESTING + 10
    for shape in SHAPES:
        x = _inputs(seed, shape)
        for f, args in [
            (branch_compare_in_loop, (x,)),
            (branch_compare_in_loop, (x.abs() + 1,)),  # the other side first
            (branch_truth_in_loop, (x, 5)),
            (print_in_loop, (x, 4)),
        ]:
            opt = danlu_dynamo.optimize("eager")(f)
            expected = f(*args)
            got = _deep(depth, opt, *args)
            assert torch.equal(expected, got)
            kinds = _kinds(opt._capture_ctx)
            assert kinds and set(kinds) <= {"resume", "return"}
    capsys.readouterr()


# ------------------------------------------------------------------ 3.12 instructions at a break
def store_slice_break(x, buf):
    y = x * 2
    buf[0:2] = b"ab"  # 3.12: STORE_SLICE (3.11: BUILD_SLICE + STORE_SUBSCR); not traced
    return y + len(buf)


class Scale:
    """An object whose unary plus is not traced (3.12: CALL_INTRINSIC_1)."""

    def __init__(self, v):
        self.v = v

    def __pos__(self):
        print("+", end="")
        return self.v


def unary_plus_break(x, s):
    y = x * 2
    return y * +s


@pytest.mark.parametrize("seed", [51, 52])
def test_breaks_at_3_12_instructions_resume(seed, capsys):
    x = _inputs(seed, (3, 4))
    bufs = [bytearray(b"xyz"), bytearray(b"xyz")]
    opt = danlu_dynamo.optimize("eager")(store_slice_break)
    assert torch.equal(opt(x, bufs[0]), store_slice_break(x, bufs[1]))
    assert bufs[0] == bufs[1] == bytearray(b"abz")
    ctx = opt._capture_ctx
    assert _kinds(ctx)[0] == "resume" and not ctx.eager_reasons and not ctx.fallbacks
    ctx = _run_both(unary_plus_break, x, Scale(3.0))
    assert "resume" in _kinds(ctx) and not ctx.eager_reasons and not ctx.fallbacks
    capsys.readouterr()


# ------------------------------------------------------------------ comprehensions
def item_in_listcomp(x):
    y = x * 2
    ys = [t.sum().item() for t in (y, y + 1, y - 1)]
    return y * ys[0] + ys[1] - ys[2]


def print_in_setcomp_and_dictcomp(x):
    s = {print("s", end="") or k for k in range(3)}
    d = {k: print("d", end="") or x * k for k in sorted(s)}
    return d[0] + d[1] + d[2]


def shadowed_comprehension_variable(x):
    t = x + 1  # the comprehension's t shadows this one: it must be put back afterwards
    ys = [print("v", end="") or t * 2 for t in (x, x * 3)]
    return t + ys[0] + ys[1]


def nested_comprehension(x):
    rows = [[print("n", end="") or a * b for b in (x, x + 1)] for a in (x, x - 1)]
    return rows[0][0] + rows[0][1] * rows[1][0] - rows[1][1]


@pytest.mark.parametrize("seed", [31, 32])
@pytest.mark.parametrize("shape", SHAPES)
def test_break_inside_a_comprehension(seed, shape, capsys):
    x = _inputs(seed, shape)
    for f in (
        item_in_listcomp,
        print_in_setcomp_and_dictcomp,
        shadowed_comprehension_variable,
        nested_comprehension,
    ):
        ctx = _run_both(f, x)
        assert not ctx.fallbacks, ctx.fallbacks
        if PY312:  # inlined: the comprehension's cleanup handler is not a try block
            assert not ctx.eager_reasons, ctx.eager_reasons
            assert "resume" in _kinds(ctx)
    capsys.readouterr()


def test_comprehension_appends_after_a_break_reach_the_result():
    x = torch.arange(4.0)
    e = danlu_dynamo.explain(item_in_listcomp)(x)
    assert e.graph_break_count >= 3  # one per .item()
    got = danlu_dynamo.optimize("eager")(item_in_listcomp)(x)
    assert torch.equal(got, item_in_listcomp(x))


# ------------------------------------------------------------------ ModelOutput-like classes
class ModelOutput(collections.OrderedDict):
    """The shape of transformers' ModelOutput: a dict whose dataclass fields are also keys."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is not None:
                self[f.name] = v

    def __setattr__(self, name, value):
        if name in {f.name for f in dataclasses.fields(self)} and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class LMOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden: tuple | None = None


def output_after_break_in_try(x):
    y = x.sin()
    try:
        print("t", end="")
    finally:
        y = y * 2
    return LMOutput(loss=y.sum(), logits=y)


def output_after_branch_in_loop(x):
    for _ in range(2):
        x = x * 2
        if x.mean() > 0:
            x = x - 1
    return LMOutput(loss=x.sum(), logits=x, hidden=(x, x + 1))


def output_in_traced_code(x):
    y = x.cos()
    return LMOutput(logits=y, hidden=(y,))


def read_output(out, x):
    t = out.to_tuple()
    return out[0] + out["logits"] * out.logits + t[-1] + x + len(t)


@pytest.mark.parametrize("seed", [41, 42])
@pytest.mark.parametrize("shape", SHAPES)
def test_dict_dataclass_outputs_after_breaks(seed, shape, capsys):
    x = _inputs(seed, shape)
    for f, eager_regions in [
        (output_after_break_in_try, 1),  # the rest of that frame runs in plain Python
        (output_after_branch_in_loop, 0),
        (output_in_traced_code, 0),
    ]:
        ctx = _run_both(f, x)
        assert not ctx.fallbacks
        e = danlu_dynamo.explain(f)(x)
        # no break inside LMOutput's __init__/__post_init__/__setattr__/__setitem__
        assert all("<string>" not in str(b) for b in e.break_reasons), e.break_reasons
        assert all(b.code.co_name.startswith(f.__name__) for b in e.break_reasons if b.code)
        assert len(e.eager_regions) == eager_regions, e.eager_regions
        out = danlu_dynamo.optimize("eager")(f)(x)
        assert type(out) is LMOutput and list(out.keys()) == list(f(x).keys())
        assert out.logits is out["logits"]
    capsys.readouterr()


@pytest.mark.parametrize("seed", [43, 44])
def test_dict_dataclass_from_the_frame_state_is_read_without_breaks(seed):
    x = _inputs(seed, (3, 4))
    for out in (LMOutput(loss=x.sum(), logits=x * 2), LMOutput(logits=x.exp())):
        ctx = _run_both(read_output, out, x)
        assert _kinds(ctx) == ["return"] and not ctx.breaks


def test_dict_dataclass_set_up_frames_are_left_to_python():
    from danlu_dynamo.capture_context import sets_up_dict_dataclass

    class Frame:  # what the hook passes: the code and the arguments
        def __init__(self, code, f_locals):
            self.f_code, self.f_locals = code, f_locals

    out = LMOutput(logits=torch.ones(2))
    for name in ("__init__", "__post_init__", "__setattr__", "__setitem__"):
        code = getattr(LMOutput, name).__code__
        assert sets_up_dict_dataclass(Frame(code, {code.co_varnames[0]: out}))

    @dataclasses.dataclass
    class Plain:  # not a dict: traced as before
        a: int = 0

    code = Plain.__init__.__code__
    assert not sets_up_dict_dataclass(Frame(code, {"self": Plain()}))
    # a dict that is not a dataclass, or another class's method: traced as before
    code = ModelOutput.__setitem__.__code__
    assert not sets_up_dict_dataclass(Frame(code, {"self": ModelOutput()}))
    code = output_in_traced_code.__code__
    assert not sets_up_dict_dataclass(Frame(code, {"x": out}))
