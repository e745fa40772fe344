"""Lists from the frame state that the trace only appends to are guarded on their type alone
(length and items are guarded only once read), so a list that grows on every call does not
recompile; the appends are replayed onto the list as it is at run time."""

import torch

import danlu_dynamo

_log: list = []


def append_to_global(x):
    y = x.sin()
    _log.append(y)
    _log.extend([x.shape[0], "tag"])
    return y * 2


def test_global_list_that_only_grows_does_not_recompile():
    _log.clear()
    ref_log = []
    opt = danlu_dynamo.optimize("eager")(append_to_global)
    for shape in [(4,), (4,), (4,), (4,), (3, 2), (3, 2)]:
        x = torch.randn(shape)
        got = opt(x)
        ref = x.sin() * 2
        ref_log += [x.sin(), x.shape[0], "tag"]
        assert torch.equal(got, ref)
        assert len(_log) == len(ref_log)
        for a, b in zip(_log, ref_log, strict=True):
            assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
    ctx = opt._capture_ctx
    assert not ctx.breaks and not ctx.eager_reasons
    graphs = [r for r in ctx.records if r.num_ops > 0]
    assert len(graphs) == 2, len(graphs)  # one per shape, not one per call


def append_then_read(x, acc):
    acc.append(x * 2)
    acc += [x + 1]
    n = len(acc)  # reads the list: from here on its length is guarded
    acc.extend(acc[-2:])
    return x * n + acc[0]


def test_list_read_after_appends_is_exact():
    opt = danlu_dynamo.optimize("eager")(append_then_read)
    for shape in [(4,), (2, 3)]:
        for start in ([], [torch.ones(shape)]):
            x = torch.randn(shape)
            ref_acc, got_acc = list(start), list(start)
            ref = append_then_read(x, ref_acc)
            got = opt(x, got_acc)
            assert torch.equal(ref, got)
            assert len(ref_acc) == len(got_acc)
            assert all(torch.equal(a, b) for a, b in zip(ref_acc, got_acc, strict=True))
    assert not opt._capture_ctx.breaks


def append_across_a_break(x, acc):
    acc.append(x + 1)
    print("break")
    acc.append(len(acc))
    acc.extend(acc)  # reads itself
    return x * len(acc)


def test_appends_across_a_break_and_self_extend():
    opt = danlu_dynamo.optimize("eager")(append_across_a_break)
    for shape in [(4,), (2, 3)]:
        x = torch.randn(shape)
        ref_acc, got_acc = [0], [0]
        ref = append_across_a_break(x, ref_acc)
        for _ in range(2):
            got_acc = [0]
            got = opt(x, got_acc)
            assert torch.equal(ref, got)
            assert len(ref_acc) == len(got_acc)
            for a, b in zip(ref_acc, got_acc, strict=True):
                assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b


def append_to_two(x, a, b):
    a.append(x + 1)
    b.append(x + 2)
    a.append(x + 3)
    return x * 2


def test_two_appended_lists_that_become_one_list_recompile():
    opt = danlu_dynamo.optimize("eager")(append_to_two)
    x = torch.randn(3)
    a, b = [], []
    opt(x, a, b)
    assert [t.tolist() for t in a] == [(x + 1).tolist(), (x + 3).tolist()]
    same, ref = [], []
    opt(x, same, same)  # one list: the appends must interleave as in eager
    append_to_two(x, ref, ref)
    assert len(same) == len(ref) == 3
    assert all(torch.equal(p, q) for p, q in zip(same, ref, strict=True))


def mutate_one_read_other(x, a, b, d, e):
    a.append(1)
    d["k"] = 2
    return x * (len(b) + 10 * len(e))


def test_mutated_container_reached_twice_at_run_time_is_exact():
    opt = danlu_dynamo.optimize("eager")(mutate_one_read_other)
    x = torch.randn(3)
    for share in (False, True, False, True):
        args = []
        for _ in range(2):  # eager and captured get equal fresh containers
            a, d = [0], {"z": 0}
            b = a if share else [0]
            e = d if share else {"z": 0}
            args.append((a, b, d, e))
        ref = mutate_one_read_other(x, *args[0])
        got = opt(x, *args[1])
        assert torch.equal(ref, got), share
        assert args[0][0] == args[1][0] and args[0][2] == args[1][2]
