"""Differential testing of capture: random small programs over Python features, run eagerly
and compiled, compared.

``program(seed)`` writes a function ``f(x, y, lst, d)`` (two tensors, a list of tensors, a dict
of tensors) as a sequence of statements drawn from ``SNIPPETS``: containers and their views,
classes with dunder methods and class-level state, closures, generators, context managers,
exceptions, numpy interop and stdlib helpers, each over the variables earlier statements made.
``check(source, backend)`` runs it eagerly and compiled on the same fresh inputs three times
(new values, same shapes) and classifies the outcome:

- ``correct``: results, the inputs after mutation and the program's module state agree;
- ``wrong``: they do not (the worst outcome);
- ``raised``: the compiled run raised where eager did not;
- ``eager_error``: eager itself raised (the generator's fault; not counted);
- ``hung``: the compiled run passed the time limit.

It also records the graphs captured, graph breaks, and how many of the three calls captured
anew (``recompiles``: calls after the first that compiled again). The same machinery runs the
fixed corpus (``packages/dynamo/tests/_programs_*.py``) in ``benchmarks/dynamo_differential.py``.
Every snippet is a template with the types of the variables it reads and writes, so any
sequence is valid Python.
"""

from __future__ import annotations

import contextlib
import dataclasses
import linecache
import random
import signal
import zlib

import torch

PREAMBLE = """\
import collections
import contextlib
import functools
import itertools
import math
import operator

import numpy as np
import torch

STATE = {"calls": 0, "scale": 1.0, "log": []}


class Counter:
    count = 0

    def __init__(self, t):
        Counter.count += 1
        self.t = t

    def bump(self):
        type(self).count += 1
        return self.t * type(self).count


class Vec:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        if isinstance(other, Vec):
            return Vec(self.t + other.t)
        if isinstance(other, (int, float)):
            return Vec(self.t + other)
        return NotImplemented

    def __radd__(self, other):
        return Vec(self.t + other) if isinstance(other, (int, float)) else NotImplemented

    def __iadd__(self, other):
        self.t = self.t + (other.t if isinstance(other, Vec) else other)
        return self

    def __mul__(self, k):
        return Vec(self.t * k)

    def __eq__(self, other):
        return isinstance(other, Vec) and bool((self.t == other.t).all())

    def __lt__(self, other):
        return bool(self.t.sum() < other.t.sum())

    def __len__(self):
        return self.t.shape[0]

    def __getitem__(self, i):
        return self.t[i]


@contextlib.contextmanager
def scaled(k):
    old = STATE["scale"]
    STATE["scale"] = old * k
    try:
        yield STATE["scale"]
    finally:
        STATE["scale"] = old


class Flag:
    on = False

    def __enter__(self):
        Flag.on = True
        return self

    def __exit__(self, *exc):
        Flag.on = False
        return False


Point = collections.namedtuple("Point", ["a", "b"], defaults=[1])


def helper(t, k=2, *, shift=0.0):
    return t * k + shift


def gen_pieces(t, n):
    for i in range(n):
        yield t * (i + 1)


"""


@dataclasses.dataclass
class Snippet:
    """``template`` is formatted with ``t``/``u`` (tensors), ``n`` (an int), ``v`` (a new
    name); ``makes`` is the kind of ``v`` ("t", "n", "o" for any other value, or None)."""

    name: str
    template: str
    makes: str | None = "t"


S = Snippet
SNIPPETS = [
    # ---- tensors and numbers
    S("arith", "{v} = {t} * 2 + {u}.sin()"),
    S("reduce_int", "{v} = int({t}.shape[0]) + {n}", "n"),
    S("math_int", "{v} = math.floor(math.sqrt({n} + 4)) + {n} % 3", "n"),
    S("fstring", "{v} = len(f'{{{t}.shape}} {{{n}}}')", "n"),
    S("isinstance", "{v} = {t} + (1 if isinstance({t}, torch.Tensor) else 2)"),
    # ---- lists
    S("list_append", "lst.append({t} + 1)\n{v} = lst[-1] * 2"),
    S("list_extend_slice", "lst.extend([{t}, {u}])\n{v} = sum(lst[-2:])"),
    S("list_pop", "{v} = lst.pop() if len(lst) > 1 else {t}"),
    S("list_insert", "lst.insert(0, {t} * 3)\n{v} = lst[0] - lst[-1]"),
    S("list_comp", "{v} = torch.stack([e * i for i, e in enumerate(lst)]).sum(0)"),
    S("list_sort_key", "{v} = sorted(lst, key=lambda e: float(e.sum()))[0] + 0", "t"),
    S("list_reversed", "{v} = list(reversed(lst))[0] * 1.5"),
    S("tuple_unpack", "_a, *_rest = lst\n{v} = _a + len(_rest)"),
    S("zip_range", "{v} = sum(e * k for e, k in zip(lst, range(1, 100)))"),
    # ---- dicts and their views
    S("dict_set", "d['k{n}'] = {t} * 0.5\n{v} = d['k{n}'] + {u}"),
    S("dict_get", "{v} = d.get('missing', {t}) + d.get('a', {u})"),
    S(
        "dict_keys_view",
        "_keys = d.keys()\nd['new{n}'] = {t}\n{v} = len(_keys) + ('new{n}' in _keys)",
        "n",
    ),
    S("dict_values_view", "_vals = d.values()\nd['z'] = {t}\n{v} = sum(_vals) * 1.0"),
    S(
        "dict_items_view",
        "_items = d.items()\nd['w'] = {u}\n{v} = [k for k, _ in _items][-1] == 'w'",
        "o",
    ),
    S(
        "dict_keys_setops",
        "{v} = sorted(d.keys() & {{'a', 'b', 'q'}}) + sorted(d.keys() - {{'a'}})",
        "o",
    ),
    S("dict_comp", "{v} = sum({{k: e * 2 for k, e in d.items()}}.values())"),
    S(
        "dict_fromkeys",
        "_fk = dict.fromkeys(['p', 'q'], 0)\n_fk['p'] += {n}\n{v} = _fk['p'] + len(_fk)",
        "n",
    ),
    S("dict_setdefault_pop", "d.setdefault('s', {t})\n{v} = d.pop('s') + {u}"),
    S("dict_update", "d.update({{'u': {t}, 'a': {u}}})\n{v} = d['u'] * d['a']"),
    S("dict_nonconst_key", "_key = 'k' + str({n} % 3)\nd[_key] = {t}\n{v} = d[_key] + 1"),
    # ---- user classes
    S("vec_add", "{v} = (Vec({t}) + Vec({u}) + 1).t"),
    S("vec_radd", "{v} = (2 + Vec({t})).t"),
    S("vec_iadd", "_w = Vec({t})\n_w += Vec({u})\n_w += 1\n{v} = _w.t"),
    S("vec_compare", "{v} = (Vec({t}) == Vec({t} + 0)) + (Vec({t}) < Vec({t} + 1)) * 2", "n"),
    S("vec_len_getitem", "{v} = Vec({t})[0] * len(Vec({t}))"),
    S("class_counter", "_c = Counter({t})\n{v} = _c.bump() + Counter.count", "t"),
    S("namedtuple", "_p = Point({t}, {n})\n{v} = _p.a * _p.b + Point({u}).b"),
    # ---- closures, partial, generators
    S(
        "closure_nonlocal",
        "def _make():\n    _k = 0\n    def _inc(e):\n        nonlocal _k\n        _k += 1\n"
        "        return e * _k\n    return _inc\n_inc = _make()\n{v} = _inc({t}) + _inc({u})",
    ),
    S("partial_kw", "_h = functools.partial(helper, k={n}, shift=0.5)\n{v} = _h({t})"),
    S("generator_sum", "{v} = sum(gen_pieces({t}, 3))"),
    S("generator_expr_list", "{v} = torch.stack(list(e * 2 for e in (lst[0], {t}))).sum(0)"),
    S("lambda_map", "{v} = sum(map(lambda e: e.cos(), lst))"),
    # ---- context managers
    S("contextmanager_state", "with scaled({n} + 1) as _s:\n    {v} = {t} * STATE['scale'] + _s"),
    S(
        "class_context",
        "with Flag():\n    {v} = {t} + (1 if Flag.on else -1)\n{v} = {v} * (2 if Flag.on else 3)",
    ),
    S("no_grad_block", "with torch.no_grad():\n    {v} = {t} * 2"),
    S(
        "autocast_block",
        "with torch.autocast('cpu', dtype=torch.bfloat16):\n    {v} = ({t} @ {u}.t()).float()",
    ),
    # ---- exceptions
    S("try_keyerror", "try:\n    {v} = d['nope'] + {t}\nexcept KeyError:\n    {v} = {t} - 1"),
    S("try_finally", "try:\n    {v} = {t} * 4\nfinally:\n    STATE['calls'] += 1"),
    S("try_indexerror", "try:\n    {v} = lst[100]\nexcept IndexError:\n    {v} = {u} + 2"),
    # ---- module state
    S("global_log", "STATE['log'].append({n})\n{v} = len(STATE['log']) + {n}", "n"),
    # ---- stdlib helpers
    S("itertools_chain", "{v} = sum(itertools.chain(lst, [{t}]))"),
    S("chain_from_iterable", "{v} = sum(itertools.chain.from_iterable([[{t}], lst]))"),
    S("functools_reduce", "{v} = functools.reduce(operator.add, lst, {t})"),
    S(
        "deque_ops",
        "_q = collections.deque(lst, maxlen=3)\n_q.appendleft({t})\n{v} = _q[0] + _q[-1]",
    ),
    S("sorted_ints", "{v} = sorted([{n}, 3, -1], reverse=True)[0] + min(2, {n})", "n"),
    # ---- numpy interop
    S("numpy_roundtrip", "{v} = torch.from_numpy({t}.detach().numpy() * 2.0) + {u}"),
    S("numpy_scalar", "{v} = {t} * float(np.float32(1.5))"),
    S(
        "numpy_reduce",
        "{v} = torch.from_numpy(np.maximum({t}.numpy().sum(axis=1, keepdims=True), 0) * {u}.numpy())",
    ),
    S(
        "numpy_where_clip",
        "{v} = torch.as_tensor(np.where({t}.numpy() > 0, {u}.numpy(), 0.0).clip(-1, 1))",
    ),
    S("numpy_write_through", "_arr = {t}.numpy()\n_arr[0] = 2.0\n{v} = {t} * 1"),
    S("numpy_mean_scalar", "{v} = {t} + torch.tensor({t}.numpy().mean())"),
    # ---- in-place on inputs
    S("inplace_input", "x.add_(1.0)\n{v} = x * {t}"),
]


def _draws(seed: int, length: int | None = None) -> tuple[list, list[str]]:
    """The statements of ``program(seed)`` and the names it returns."""
    rng = random.Random(seed)
    length = length or rng.randint(3, 7)
    kinds: dict[str, list[str]] = {"t": ["x", "y"], "n": ["0"], "o": []}
    statements = []
    for i in range(length):
        snip = rng.choice(SNIPPETS)
        name = f"v{i}"
        t, u, n = rng.choice(kinds["t"]), rng.choice(kinds["t"]), rng.choice(kinds["n"])
        statements.append((snip, snip.template.format(t=t, u=u, n=n, v=name)))
        if snip.makes:
            kinds[snip.makes].append(name)
    return statements, [*kinds["t"][2:], *kinds["n"][1:], *kinds["o"]]


def _function(body: str, outs: list[str]) -> str:
    lines = body.splitlines() + [f"return ({', '.join(outs)},)" if outs else "return None"]
    return PREAMBLE + "def f(x, y, lst, d):\n" + "\n".join("    " + ln for ln in lines) + "\n"


def program(seed: int, length: int | None = None) -> str:
    """The source of ``f(x, y, lst, d)`` for ``seed`` (deterministic)."""
    statements, outs = _draws(seed, length)
    return _function("\n".join(code for _, code in statements), outs)


def snippets_of(seed: int) -> set[str]:
    """The names of the snippets ``program(seed)`` is made of."""
    return {snip.name for snip, _ in _draws(seed)[0]}


def snippet_program(snip: Snippet) -> str:
    """``snip`` alone, over the inputs: the smallest program that exercises it."""
    body = snip.template.format(t="x", u="y", n="3", v="v0")
    return _function(body, ["v0"] if snip.makes else [])


def inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    n = 4
    x = torch.randn(n, n, generator=g)
    y = torch.randn(n, n, generator=g)
    lst = [torch.randn(n, n, generator=g) for _ in range(2)]
    d = {"a": torch.randn(n, n, generator=g), "b": torch.randn(n, n, generator=g)}
    return x, y, lst, d


def load(source: str, filename: str):
    """Execute ``source`` as a module of its own; returns its namespace."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"__name__": "fuzz_program"}
    exec(compile(source, filename, "exec"), ns)
    return ns


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return (
            isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and bool(torch.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True))
        )
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and a != a:
        return isinstance(b, float) and b != b
    return type(a) is type(b) and a == b


def _clone(v):
    if isinstance(v, torch.Tensor):
        return v.clone()
    if isinstance(v, (list, tuple)):
        return type(v)(_clone(e) for e in v)
    if isinstance(v, dict):
        return {k: _clone(e) for k, e in v.items()}
    return v


def _state(ns):
    return {
        "STATE": _clone(ns["STATE"]),
        "Counter.count": ns["Counter"].count,
        "Flag.on": ns["Flag"].on,
    }


@contextlib.contextmanager
def time_limit(seconds: float):
    def fire(signum, frame):
        raise TimeoutError(f"no result within {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclasses.dataclass
class Outcome:
    status: str  # correct | wrong | raised | eager_error | hung
    detail: str = ""
    graphs: int = 0
    breaks: int = 0
    recompiles: int = 0


def check(source: str, compile_fn, counts, name="program", calls=3, limit=60.0) -> Outcome:
    """Run ``f`` of ``source`` eagerly and through ``compile_fn(f)`` ``calls`` times on the
    same fresh inputs. ``counts()`` -> (graphs captured so far, graph breaks so far)."""
    eager_ns = load(source, f"{name}_eager.py")
    comp_ns = load(source, f"{name}_compiled.py")
    compiled = compile_fn(comp_ns["f"])
    captured = []
    for call in range(calls):
        args = inputs(zlib.crc32(f"{name}:{call}".encode()))
        args_e, args_c = _clone(args), _clone(args)
        torch.manual_seed(call)
        try:
            expected = eager_ns["f"](*args_e)
        except Exception as e:  # noqa: BLE001 - the generator wrote an invalid program
            return Outcome("eager_error", f"{type(e).__name__}: {e}")
        torch.manual_seed(call)
        before = counts()[0]
        try:
            with time_limit(limit):
                got = compiled(*args_c)
        except TimeoutError as e:
            return Outcome("hung", str(e))
        except Exception as e:  # noqa: BLE001 - a compiled run that raises is an outcome
            return Outcome("raised", f"call {call}: {type(e).__name__}: {str(e)[:300]}")
        captured.append(counts()[0] - before)
        if not _same(expected, got):
            return Outcome("wrong", f"call {call}: results differ:\n{expected}\n{got}")
        if not _same(args_e, args_c):
            return Outcome("wrong", f"call {call}: inputs after the call differ")
        if not _same(_state(eager_ns), _state(comp_ns)):
            return Outcome(
                "wrong",
                f"call {call}: module state differs: {_state(eager_ns)} vs {_state(comp_ns)}",
            )
    graphs, breaks = counts()
    return Outcome("correct", "", graphs, breaks, sum(1 for c in captured[1:] if c))


def danlu_dynamo_runner(backend="eager", fullgraph=False):
    """(compile_fn, counts) for danlu-dynamo's ``optimize``."""
    import danlu_dynamo

    state = {}

    def compile_fn(f):
        opt = danlu_dynamo.optimize(backend, fullgraph=fullgraph)(f)
        state["ctx"] = opt._capture_ctx
        return opt

    def counts():
        ctx = state["ctx"]
        return sum(1 for r in ctx.records if getattr(r, "num_ops", 0) > 0), len(ctx.breaks)

    return compile_fn, counts
