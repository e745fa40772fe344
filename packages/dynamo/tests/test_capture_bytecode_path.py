"""The default capture path: the C frame hook caches transformed bytecode guarded by one
generated check function; graph breaks become resume functions (or the rest of the frame runs
in plain Python where a resume function cannot be built). Results are compared with eager."""

import logging
import sys

import pytest
import torch

import danlu_dynamo
from danlu_dynamo import config
from danlu_dynamo import eval_frame as ef
from danlu_dynamo.capture.frame_codegen import RESUME_OF
from danlu_dynamo.capture_context import thread_state


@pytest.fixture(autouse=True)
def bytecode_path():
    prev = config.capture_path
    config.capture_path = "bytecode"
    try:
        yield
    finally:
        config.capture_path = prev


def _run_both(f, *args, calls=2):
    opt = danlu_dynamo.optimize("eager")(f)
    for _ in range(calls):
        expected, got = f(*args), opt(*args)
        assert torch.equal(expected, got)
        assert expected.requires_grad == got.requires_grad
    return opt._capture_ctx


def _kinds(ctx):
    return [getattr(r, "kind", "segment") for r in ctx.records]


def whole(x, y):
    return torch.sin(x) * y + 1


def test_whole_frame_is_one_c_cache_entry_with_readable_guards():
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    ctx = _run_both(whole, x, y, calls=3)
    assert _kinds(ctx) == ["return"] and not ctx.breaks and not ctx.fallbacks
    (entry,) = ef.cache_entries(whole.__code__)
    record = ctx.records[0]
    assert entry.check_fn is record.check_fn and entry.code is record.transformed
    assert "TENSOR_MATCH" in record.check_fn.guards and "L['x']" in record.check_fn.guards
    # the entry belongs to its optimize() context: outside it, it never matches
    assert not record.check_fn({"x": x, "y": y})
    assert "capture context" in record.check_fn.failure_reason({"x": x, "y": y})
    thread_state.ctx = ctx
    try:
        assert record.check_fn({"x": x, "y": y})
        reason = record.check_fn.failure_reason({"x": torch.randn(2, 4), "y": y})
    finally:
        thread_state.ctx = None
    assert reason is not None and "TENSOR_MATCH" in reason and "L['x']" in reason
    assert "___graph(" in record.runner.source


def test_new_shape_recompiles_and_both_entries_stay_valid():
    opt = danlu_dynamo.optimize("eager")(whole)
    a, b = torch.randn(3), torch.randn(5)
    for x in (a, b, a, b):
        assert torch.equal(opt(x, x), whole(x, x))
    assert len(opt._capture_ctx.records) == 2


def brk(x):
    y = x * 2
    print("break")
    return y + x


def test_graph_break_resumes_in_a_generated_function(capsys):
    ctx = _run_both(brk, torch.randn(4))
    assert _kinds(ctx) == ["resume", "return"]
    assert len(ctx.breaks) == 1 and "print" in ctx.breaks[0].reason
    assert capsys.readouterr().out.count("break") == 4  # eager and compiled, twice
    resume_code = next(c for c in RESUME_OF if RESUME_OF[c][0] is brk.__code__)
    assert resume_code.co_filename == brk.__code__.co_filename
    assert ef.cache_entries(resume_code)  # the hook compiled the resume function


def nested_call(x):
    return torch.add(x, print("n") or x) * 2


def test_break_inside_a_call_in_progress_resumes():
    # torch.add's call is in progress (its NULL slot is on the stack) when print breaks: the
    # stack below the break stays in temporaries and the resume function pushes the NULL.
    ctx = _run_both(nested_call, torch.randn(3))
    assert _kinds(ctx) == ["resume", "return"] and not ctx.eager_reasons
    resume_code = next(c for c in RESUME_OF if RESUME_OF[c][0] is nested_call.__code__)
    assert True in RESUME_OF[resume_code][2]  # a NULL slot in its stack layout


def looped(x, n):
    for i in range(n):
        x = x * 1.5
        print(i, end="")
        x = x + i
    return x


def test_graph_break_inside_a_loop():
    ctx = _run_both(looped, torch.randn(3), 3)
    assert set(_kinds(ctx)) == {"resume", "return"}
    assert not ctx.eager_reasons


def test_long_loop_with_a_break_hits_the_limit_and_runs_on_eagerly(caplog):
    with caplog.at_level(logging.WARNING, logger="danlu_dynamo.recompiles"):
        ctx = _run_both(looped, torch.randn(3), 300, calls=1)
    assert any("recompile limit" in r for r in ctx.eager_reasons)


def in_try(x):
    try:
        y = x * 2
        print("t")
    except ValueError:
        y = x
    return y + 1


def comprehension_in_try(x):
    try:
        ys = [print("c", end="") or t * 2 for t in (x, x + 1)]
    except ValueError:
        ys = [x, x]
    return ys[0] + ys[1]


@pytest.mark.parametrize(
    "f,why",
    [
        (in_try, "inside a try/with block"),
        # 3.12+: the comprehension's own cleanup handler does not count, the try around it
        # does (3.11: the comprehension is a frame of its own)
        pytest.param(
            comprehension_in_try,
            "inside a try/with block",
            marks=pytest.mark.skipif(sys.version_info < (3, 12), reason="PEP 709"),
        ),
    ],
    ids=["try", "comprehension_in_try"],
)
def test_break_without_a_resume_function_runs_the_rest_eagerly(f, why):
    ctx = _run_both(f, torch.randn(3))
    assert _kinds(ctx) == ["continue"]
    assert any(why in r and "runs eagerly" in r for r in ctx.eager_reasons), ctx.eager_reasons
    report = danlu_dynamo.explain(f)(torch.randn(3))
    assert report.graph_break_count == 1 and any(why in r for r in report.eager_regions)


def in_with(x):
    with torch.no_grad():
        y = x * 2
        print("w")
        y = y + 1
    return y * x


def test_break_inside_a_with_block_uses_the_segment_path():
    ctx = _run_both(in_with, torch.randn(3, requires_grad=True))
    assert ctx.fallbacks and "with block" in ctx.fallbacks[0]
    assert "segment path" in str(danlu_dynamo.explain(in_with)(torch.randn(3)))


def cell_after_break(x):
    y = x + 1
    g = lambda: y * 2  # noqa: E731
    print("c")
    y = x * 3  # the closure made before the break must see this store
    return g()


def test_closure_cell_shared_across_a_break():
    ctx = _run_both(cell_after_break, torch.randn(3))
    assert _kinds(ctx)[:2] == ["resume", "return"]


def test_nonlocal_store_reaches_the_real_cell():
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


def gen(x):
    yield x * 2


def uses_generator(x):
    return sum(gen(x)) + 1


def test_generator_called_inside_is_inlined_and_its_frame_never_hooked():
    ctx = _run_both(uses_generator, torch.randn(3))
    assert _kinds(ctx) == ["return"]
    assert not ef.cache_entries(gen.__code__)


def test_fullgraph_raises_at_a_break():
    opt = danlu_dynamo.optimize("eager", fullgraph=True)(brk)
    with pytest.raises(danlu_dynamo.GraphBreakError, match="print"):
        opt(torch.randn(2))


def test_each_optimize_call_keeps_its_own_backend():
    seen = []

    def counting(tag):
        def backend(gm, example_inputs):
            seen.append(tag)
            return gm.forward

        return backend

    a = danlu_dynamo.optimize(counting("a"))(whole)
    b = danlu_dynamo.optimize(counting("b"))(whole)
    x = torch.randn(3)
    for _ in range(2):
        assert torch.equal(a(x, x), whole(x, x)) and torch.equal(b(x, x), whole(x, x))
    assert seen == ["a", "b"]


def _inlined(runner_source: str) -> str:
    """The runner's source with its shared read prefixes (``___h3 = ___h1._modules``)
    written back into the expressions that use them: each input's whole read chain."""
    import re

    defs = dict(re.findall(r"^\s+(___h\d+) = (.+)$", runner_source, re.M))

    def expand(text):
        return re.sub(r"___h\d+\b", lambda m: expand(defs[m[0]]), text)

    body = [line for line in runner_source.splitlines() if not re.match(r"\s+___h\d+ = ", line)]
    return expand("\n".join(body))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(4, 8)
        self.l2 = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


def test_module_parameters_read_from_the_module_dicts_and_guarded():
    torch.manual_seed(0)
    net = Net()
    opt = danlu_dynamo.optimize("eager")(net)
    x = torch.randn(3, 4)
    assert torch.equal(opt(x), net(x)) and torch.equal(opt(x), net(x))
    (record,) = opt._capture_ctx.records
    # the dicts, read once each: the shared prefixes are locals of the runner
    src = record.runner.source
    assert "= ___a0._modules\n" in src and src.count("._parameters\n") == 2, src
    assert "['weight']" in src and "['l1']" in src and "net.l1" not in src, src
    with torch.no_grad():  # replacing a parameter is seen by the next call
        net.l1.weight = torch.nn.Parameter(torch.randn(8, 4))
    assert torch.equal(opt(x), net(x))
    net.l2 = torch.nn.Linear(8, 2)  # a new submodule: identity guard fails, recompile
    assert torch.equal(opt(x), net(x))
    assert len(opt._capture_ctx.records) == 2


class Blocks(torch.nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(n))
        self.scale = 0.5

    def forward(self, x):
        for b in self.blocks:
            x = torch.tanh(b(x)) * self.scale
        return x


def test_guards_share_prefixes_and_index_module_lists_through_their_dicts():
    # the trace's sources are gone when the check compiles: it still reuses each parent and
    # reads submodules and list items from the module dicts, not through __getattr__
    import gc

    torch.manual_seed(0)
    net = Blocks()
    opt = danlu_dynamo.optimize("eager")(net)
    x = torch.randn(2, 4)
    gc.collect()
    assert torch.equal(opt(x), net(x)) and torch.equal(opt(x), net(x))
    (record,) = opt._capture_ctx.records
    # the guards one by one (the quick check settles the module tree in one C call)
    check = getattr(record.check_fn, "full", record.check_fn).source
    assert "._modules['blocks']" in check and "._modules['1']" in check
    assert "L['self'].blocks[1]" not in check and "L['self'].blocks" not in check.replace(
        "._modules['blocks']", ""
    )
    assert "._modules['2']._parameters['weight']" in _inlined(record.runner.source)
    net.blocks[1] = torch.nn.Linear(4, 4)  # a replaced item fails its identity guard
    assert torch.equal(opt(x), net(x))
    net.blocks.insert(0, torch.nn.Linear(4, 4))  # ModuleList renumbers: still eager's result
    assert torch.equal(opt(x), net(x))
    net.scale = 2.0
    assert torch.equal(opt(x), net(x))
    assert len(opt._capture_ctx.records) == 4


def test_sequential_items_read_through_the_dict_follow_changes_to_the_sequential():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = net

        def forward(self, x):
            return self.body(x) * 2

    outer = Outer()
    opt = danlu_dynamo.optimize("eager")(outer)
    x = torch.randn(2, 4)
    assert torch.equal(opt(x), outer(x)) and torch.equal(opt(x), outer(x))
    runner = _inlined(opt._capture_ctx.records[0].runner.source)
    assert "._modules['body']._modules['2']._parameters['weight']" in runner
    net[2] = torch.nn.Linear(4, 3)  # replaced item: identity guard fails
    assert torch.equal(opt(x), outer(x))
    net.insert(0, torch.nn.Linear(4, 4))  # keys renumbered: items shift
    assert torch.equal(opt(x), outer(x))
    del net[0]
    net.add_module("tail", torch.nn.ReLU())  # a named key: indexing is Sequential's own
    assert torch.equal(opt(x), outer(x))
    assert torch.equal(opt(x), outer(x))


def test_a_module_in_a_closure_cell_is_read_through_its_dicts():
    # danlu.compile(model) captures a wrapper that closes over the model: its parameters are
    # read from the module dicts under the cell too, not through Module.__getattr__
    torch.manual_seed(0)
    net = Blocks()

    def make(module):
        def forward(x):
            return module(x)

        return forward

    fn = make(net)
    opt = danlu_dynamo.optimize("eager")(fn)
    x = torch.randn(2, 4)
    assert torch.equal(opt(x), net(x)) and torch.equal(opt(x), net(x))
    (record,) = opt._capture_ctx.records
    runner, check = _inlined(record.runner.source), record.check_fn.source
    assert "._modules['blocks']._modules['2']._parameters['weight']" in runner
    assert ".blocks[" not in runner and ".blocks[" not in check
    net.blocks.append(torch.nn.Linear(4, 4))  # a new member: recompile, eager's result
    assert torch.equal(opt(x), net(x))


def test_module_with_a_forward_hook_runs_the_hook_and_captures_forward():
    torch.manual_seed(0)
    net = Net()
    net.register_forward_hook(lambda mod, inp, out: out * 2)
    opt = danlu_dynamo.optimize("eager")(net)
    x = torch.randn(3, 4)
    assert torch.equal(opt(x), net(x)) and torch.equal(opt(x), net(x))
    names = {r.code.co_name for r in opt._capture_ctx.records}
    assert {"forward", "<lambda>"} <= names


def test_segment_path_is_still_selectable():
    config.capture_path = "segments"
    ctx = _run_both(brk, torch.randn(3))
    assert _kinds(ctx) == ["break", "return"]


def branch(x):
    y = x * 2
    if y.sum() > 0:  # data-dependent: the branch runs in plain Python
        z = y + 1
    else:
        z = y - 1
    return z * 3


def branch_none(x, bias):
    y = x.cos()
    if bias is not None and y.max():
        return y + bias
    return y


def test_data_dependent_branch_resumes_on_either_side():
    opt = danlu_dynamo.optimize("eager")(branch)
    for x in (torch.ones(3), -torch.ones(3), torch.ones(3), -torch.ones(3)):
        assert torch.equal(opt(x), branch(x))
    ctx = opt._capture_ctx
    assert _kinds(ctx) == ["resume", "return", "return"] and not ctx.eager_reasons
    resumed = {RESUME_OF[c][1] for c in RESUME_OF if RESUME_OF[c][0] is branch.__code__}
    assert len(resumed) == 2  # one resume function per side of the branch
    opt2 = danlu_dynamo.optimize("eager")(branch_none)
    for x, bias in ((torch.ones(3), None), (torch.ones(3), torch.ones(3))):
        for _ in range(2):
            assert torch.equal(opt2(x, bias), branch_none(x, bias))


seen = []


def bound_method_on_the_stack(x):
    h = torch.relu(x)
    seen.append(float(h.sum()))  # breaks at float(); list.append is on the stack below
    return h * 2


def test_resume_function_falls_back_to_the_segment_path_when_its_stack_cannot_be_traced():
    ctx = _run_both(bound_method_on_the_stack, torch.randn(4))
    assert _kinds(ctx)[0] == "resume"
    assert any("__resume_" in r and "segment path" in r for r in ctx.fallbacks), ctx.fallbacks
    assert len(seen) == 4


def test_recompile_limit_is_per_optimize_call():
    def g(x):
        return x.cos() + 1

    # dynamic=False: every shape is a new entry
    a = danlu_dynamo.optimize("eager", dynamic=False)(g)
    b = danlu_dynamo.optimize("eager", dynamic=False)(g)
    for n in range(1, 11):  # ten shapes: the limit is 8 entries per code object and context
        x = torch.randn(n)
        assert torch.equal(a(x), g(x))
    assert len(a._capture_ctx.records) == 8
    assert any("recompile limit" in r for r in a._capture_ctx.eager_reasons)
    x = torch.randn(10)
    assert torch.equal(b(x), g(x)) and len(b._capture_ctx.records) == 1  # b still compiles


def test_runner_reads_shared_prefixes_once_and_leaves_other_reads_alone():
    from danlu_dynamo.capture.runner_codegen import hoist_prefixes

    exprs = [
        "___a0._modules['m']._parameters['w']",
        "___a0._modules['m']._parameters['b']",
        "___a0._modules['n']._buffers['r']",
        "___a1",
        "getattr(___a0, 'x')",
        "___cells[0].cell_contents._parameters['w']",
        "___a0._modules['m'].method()",
    ]
    lines, out = hoist_prefixes(exprs)
    assert lines == [
        "___h2 = ___a0._modules",
        "___h1 = ___h2['m']",
        "___h0 = ___h1._parameters",
    ]
    assert out == [
        "___h0['w']",
        "___h0['b']",
        "___h2['n']._buffers['r']",
        *exprs[3:],
    ]
    # the locals and the rewritten reads give the same objects as the original reads
    m = torch.nn.Module()
    m.m, m.n = torch.nn.Module(), torch.nn.Module()
    m.m.w, m.m.b = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.zeros(2))
    m.n.register_buffer("r", torch.zeros(1))
    scope = {"___a0": m}
    exec("\n".join(lines), scope)
    for before, after in zip(exprs[:3], out[:3]):
        assert eval(before, {"___a0": m}) is eval(after, scope)
