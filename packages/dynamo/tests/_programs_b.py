"""Capture programs, part B: Python features (control flow, containers, closures, inlining,
objects, modules, contexts, builtins)."""
# ruff: noqa: E731, B007

from __future__ import annotations

import collections
import dataclasses
import functools
from typing import NamedTuple

import torch
import torch.nn.functional as F
from _programs_a import AB, A, inp

CASES = []


def case(factory):
    def deco(fn):
        CASES.append((fn.__name__, fn, factory))
        return fn

    return deco


SCALE = 2.5
TABLE = {"a": 1, "b": 2}
LAYERS = [1, 2, 3]


def helper_double(t):
    return t * 2


def helper_kw(t, *, alpha=1.0, beta=0.0):
    return t * alpha + beta


def helper_varargs(*ts):
    return sum(ts)


def helper_kwargs(t, **kw):
    for k in sorted(kw):
        t = t + kw[k]
    return t


def helper_recursive(t, n):
    if n == 0:
        return t
    return helper_recursive(t * 0.5, n - 1)


def helper_defaults(t, k=3, mode="add"):
    return t + k if mode == "add" else t * k


def helper_returns_tuple(t):
    return t.sum(), t.mean()


# ---------------------------------------------------------------- control flow on Python values
@case(A)
def if_shape(x):
    if x.shape[0] > 3:
        return x * 2
    return x - 2


@case(A)
def if_dtype(x):
    return x.int() if x.dtype == torch.float64 else x.half()


@case(A)
def if_none_arg(x, y=None):
    if y is None:
        y = torch.ones_like(x)
    return x + y


@case(A)
def while_loop_counter(x):
    i = 0
    while i < 4:
        x = x * 1.1
        i += 1
    return x


@case(A)
def for_range(x):
    for i in range(3):
        x = x + i
    return x


@case(A)
def for_range_step(x):
    for i in range(10, 0, -3):
        x = x * i
    return x


@case(A)
def for_break_continue(x):
    for i in range(10):
        if i % 2:
            continue
        if i > 6:
            break
        x = x + i
    return x


@case(A)
def for_else(x):
    for i in range(3):
        if i == 5:
            break
    else:
        x = x + 100
    return x


@case(A)
def nested_loops(x):
    for i in range(2):
        for j in range(3):
            x = x + i * j
    return x


@case(A)
def loop_over_tensor_rows(x):
    acc = torch.zeros(x.shape[1])
    for row in x:
        acc = acc + row
    return acc


@case(A)
def ternary(x):
    return x if x.ndim == 2 else x.t()


@case(A)
def early_return(x):
    for i in range(5):
        if i == 2:
            return x * i
    return x


@case(A)
def and_or_short_circuit(x):
    a = x.shape[0] > 100 and x.sum()
    b = x.shape[0] < 100 or x.sum()
    return x * (1 if a is False else 2) * (3 if b is True else 4)


@case(A)
def assert_const(x):
    assert x.ndim == 2, "2d"
    return x + 1


@case(A)
def match_int(x):
    n = x.shape[1]
    match n:
        case 4:
            return x * 4
        case _:
            return x


@case(A)
def try_no_exception(x):
    try:
        y = x + 1
    finally:
        y = y * 2
    return y


# ---------------------------------------------------------------- containers
@case(AB)
def tuple_return(x, y):
    return (x, y, x + y)


@case(AB)
def list_build_index(x, y):
    lst = [x, y, x * y]
    return lst[1] + lst[-1]


@case(A)
def list_append_loop(x):
    out = []
    for i in range(3):
        out.append(x * i)
    return torch.stack(out)


@case(A)
def list_extend_insert_pop(x):
    lst = [x]
    lst.extend([x + 1, x + 2])
    lst.insert(0, x - 1)
    last = lst.pop()
    return last + lst[0] + len(lst)


@case(A)
def list_slicing(x):
    lst = [x * i for i in range(5)]
    return sum(lst[1:4]) + lst[::2][1]


@case(A)
def list_reverse_copy(x):
    lst = [x, x * 2, x * 3]
    c = lst.copy()
    c.reverse()
    return c[0] - lst[0]


@case(A)
def list_concat_mul(x):
    lst = [x] + [x * 2] * 2
    return len(lst) * lst[2]


@case(A)
def list_setitem(x):
    lst = [x, x]
    lst[1] = x * 5
    return lst[1]


@case(A)
def list_del(x):
    lst = [x, x * 2, x * 3]
    del lst[0]
    return lst[0]


@case(A)
def list_index_count(x):
    names = ["a", "b", "c", "b"]
    return x * names.index("c") + names.count("b")


@case(A)
def dict_build_get(x):
    d = {"a": x, "b": x * 2}
    return d["a"] + d.get("b") + d.get("c", x)


@case(A)
def dict_mutate(x):
    d = {}
    d["k"] = x
    d.update(j=x * 2)
    d.setdefault("m", x * 3)
    v = d.pop("j")
    return d["k"] + v + d["m"] + len(d)


@case(A)
def dict_iteration(x):
    d = {"a": 1, "b": 2, "c": 3}
    for k, v in d.items():
        x = x + v
    for k in d:
        x = x * (len(k))
    return x, list(d.keys()), tuple(d.values())


@case(A)
def dict_comprehension(x):
    d = {f"k{i}": x * i for i in range(3)}
    return d["k2"]


@case(A)
def dict_in(x):
    return x * 2 if "a" in TABLE else x


@case(A)
def dict_return(x):
    return {"out": x * 2, "aux": [x.sum()]}


@case(A)
def ordered_dict(x):
    d = collections.OrderedDict()
    d["x"] = x
    return d["x"] * 2


@case(A)
def set_ops(x):
    s = {1, 2, 3}
    s.add(4)
    return x * len(s) if 4 in s else x


@case(A)
def tuple_unpack(x):
    a, b, c = x.shape[0], x.shape[1], 3
    return x * (a + b + c)


@case(A)
def star_unpack(x):
    first, *rest = [x, x * 2, x * 3]
    return first + sum(rest)


@case(A)
def nested_unpack(x):
    (a, b), c = (x, x * 2), x * 3
    return a + b + c


@case(A)
def list_comprehension(x):
    return [x * i for i in range(4) if i != 2]


@case(A)
def nested_comprehension(x):
    return [[x * i * j for j in range(2)] for i in range(2)]


@case(A)
def generator_sum(x):
    return sum(x * i for i in range(4))


@case(A)
def generator_tuple(x):
    return tuple(t.sum() for t in (x, x * 2))


@case(A)
def generator_all_any(x):
    return x * 2 if all(i < 5 for i in range(3)) and not any(i > 5 for i in range(3)) else x


@case(A)
def namedtuple_make(x):
    P = collections.namedtuple("P", ["a", "b"])
    p = P(x, x * 2)
    return p.a + p[1]


class Pair(NamedTuple):
    first: torch.Tensor
    second: torch.Tensor


@case(A)
def typed_namedtuple(x):
    p = Pair(x, x + 1)
    return p.first * p.second, p


@case(A)
def slice_objects(x):
    s = slice(1, 3)
    return x[:, s]


@case(A)
def tuple_compare(x):
    return x * 2 if (1, 2) < (1, 3) else x


@case(A)
def string_ops(x):
    name = "layer_" + str(3)
    return x * len(name.split("_")) if name.startswith("layer") else x


@case(A)
def fstring(x):
    k = f"{x.shape[0]}x{x.shape[1]:d}"
    return x * len(k)


# ---------------------------------------------------------------- globals, closures, cells
@case(A)
def global_read(x):
    return x * SCALE + TABLE["b"] + LAYERS[-1]


@case(A)
def global_function_call(x):
    return helper_double(x)


@case(A)
def closure_read(x):
    k = 3

    def inner(t):
        return t * k

    return inner(x)


@case(A)
def closure_write_nonlocal(x):
    count = 0

    def bump(t):
        nonlocal count
        count += 1
        return t + count

    y = bump(x)
    y = bump(y)
    return y * count


@case(A)
def closure_returned(x):
    def make(scale):
        return lambda t: t * scale

    f = make(4)
    return f(x)


@case(A)
def closure_over_tensor(x):
    def add_x(t):
        return t + x

    return add_x(x * 2)


_outer_scale = 3


def _make_closure_fn():
    s = 1.5

    def fn(x):
        return x * s + _outer_scale

    return fn


closure_fn_from_factory = _make_closure_fn()
case(A)(closure_fn_from_factory)


@case(A)
def lambda_inline(x):
    return (lambda t, k=2: t * k)(x)


@case(A)
def functools_partial(x):
    return functools.partial(helper_kw, alpha=2.0)(x, beta=1.0)


# ---------------------------------------------------------------- user functions
@case(A)
def call_kwargs_only(x):
    return helper_kw(x, beta=2.0, alpha=0.5)


@case(A)
def call_varargs(x):
    return helper_varargs(x, x * 2, x * 3)


@case(A)
def call_kwargs_dict(x):
    return helper_kwargs(x, b=1.0, a=2.0)


@case(A)
def call_star_args(x):
    args = (x, x)
    kw = {"a": 1.0}
    return helper_varargs(*args) + helper_kwargs(x, **kw)


@case(A)
def call_recursive(x):
    return helper_recursive(x, 3)


@case(A)
def call_defaults(x):
    return helper_defaults(x) + helper_defaults(x, 2, mode="mul")


@case(A)
def call_tuple_return(x):
    s, m = helper_returns_tuple(x)
    return s - m


@case(A)
def builtin_map_filter(x):
    return list(map(helper_double, [x, x + 1]))[1] + len(list(filter(None, [0, 1, 2])))


@case(A)
def builtin_zip_enumerate(x):
    out = x
    for i, (a, b) in enumerate(zip([1, 2], [3, 4])):
        out = out + i * a * b
    return out


@case(A)
def builtin_min_max(x):
    return x * min(3, 1, 2) + max([1, 5, 2])


@case(A)
def builtin_len_range(x):
    return x * len(range(2, 10, 3))


@case(A)
def builtin_sorted_reversed(x):
    return x * sorted([3, 1, 2])[0] + list(reversed([1, 2, 3]))[0]


@case(A)
def builtin_isinstance(x):
    if isinstance(x, torch.Tensor) and isinstance(3, (int, float)) and not isinstance(x, list):
        return x + 1
    return x


@case(A)
def builtin_type_check(x):
    return x * 2 if type(x) is torch.Tensor else x


@case(A)
def builtin_getattr_hasattr(x):
    y = x.T
    return y * 2 if hasattr(x, "shape") and not hasattr(x, "nonexistent_attr") else y


@case(A)
def builtin_callable(x):
    return x * 2 if callable(helper_double) else x


@case(A)
def builtin_iter_next(x):
    it = iter([x, x * 2])
    a = next(it)
    b = next(it)
    return a + b + next(it, x)


# ---------------------------------------------------------------- objects and dataclasses
class Config:
    def __init__(self, scale, bias):
        self.scale = scale
        self.bias = bias

    @property
    def total(self):
        return self.scale + self.bias

    def apply(self, t):
        return t * self.scale + self.bias

    @staticmethod
    def static_double(t):
        return t * 2

    @classmethod
    def make_default(cls):
        return cls(1.0, 0.0)


CFG = Config(2.0, 1.0)


@dataclasses.dataclass
class State:
    t: torch.Tensor
    steps: int = 0


@case(A)
def object_attr_read(x):
    return x * CFG.scale + CFG.bias


@case(A)
def object_method_call(x):
    return CFG.apply(x)


@case(A)
def object_property(x):
    return x * CFG.total


@case(A)
def object_staticmethod(x):
    return Config.static_double(x)


@case(A)
def object_classmethod_ctor(x):
    return Config.make_default().apply(x)


@case(A)
def object_construct_in_trace(x):
    c = Config(3.0, x)
    return c.apply(x)


@case(A)
def object_returned_new(x):
    c = Config(x * 2, 1)
    return c.scale


@case(A)
def dataclass_construct(x):
    s = State(x, 2)
    s.steps += 1
    return s.t * s.steps


@case(A)
def dataclass_returned(x):
    s = State(x * 3)
    return s


class Counter:
    def __init__(self):
        self.n = 0
        self.items = []


COUNTER = Counter()


@case(A)
def object_attr_mutation_replayed(x):
    COUNTER.n = 7
    COUNTER.n = COUNTER.n + 1
    return x + COUNTER.n


@case(A)
def list_mutation_replayed(x):
    LOG = COUNTER.items
    LOG.clear()
    LOG.append(1)
    LOG.append(2)
    return x * len(LOG)


def mutate_arg_list(x, acc):
    acc.append(x * 2)
    return x + len(acc)


case(lambda g, v: (torch.randn(3 + v, 4, generator=g), []))(mutate_arg_list)


def mutate_arg_dict(x, d):
    d["y"] = x + 1
    d.pop("drop", None)
    return x


case(lambda g, v: (torch.randn(3 + v, 4, generator=g), {"drop": 1, "keep": 2}))(mutate_arg_dict)


def object_arg_setattr(x, obj):
    obj.last = x.sum()
    obj.count = getattr(obj, "count", 0) + 1
    return x


case(lambda g, v: (torch.randn(3 + v, 4, generator=g), Counter()))(object_arg_setattr)
_GLOBAL_STORE = 0


@case(A)
def global_store(x):
    global _GLOBAL_STORE
    _GLOBAL_STORE = 5
    return x * _GLOBAL_STORE


@case(A)
def super_call(x):
    class Base:
        def f(self, t):
            return t * 2

    class Child(Base):
        def f(self, t):
            return super().f(t) + 1

    return Child().f(x)


# ---------------------------------------------------------------- nn.Module
class MLP(torch.nn.Module):
    def __init__(self, d=4, h=8):
        super().__init__()
        self.fc1 = torch.nn.Linear(d, h)
        self.fc2 = torch.nn.Linear(h, d)
        self.act = torch.nn.GELU()

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Blocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([MLP() for _ in range(3)])
        self.norms = torch.nn.ModuleDict(
            {"pre": torch.nn.LayerNorm(4), "post": torch.nn.LayerNorm(4)}
        )
        self.seq = torch.nn.Sequential(
            torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4)
        )
        self.register_buffer("offset", torch.ones(4))
        self.scale = 0.5

    def forward(self, x):
        x = self.norms["pre"](x)
        for i, layer in enumerate(self.layers):
            x = x + layer(x) * self.scale
        x = self.seq(x) + self.offset
        if self.training:
            x = x * 2
        return self.norms["post"](x)


_torch_mods = {}


def _mod(name, ctor):
    if name not in _torch_mods:
        with torch.random.fork_rng():
            torch.manual_seed(0)
            _torch_mods[name] = ctor()
    return _torch_mods[name]


@case(A)
def module_mlp(x):
    return _mod("mlp", MLP)(x)


@case(A)
def module_blocks_eval(x):
    return _mod("blocks_eval", lambda: Blocks().eval())(x)


@case(A)
def module_blocks_train(x):
    return _mod("blocks_train", Blocks)(x)


@case(A)
def module_sequential_slice(x):
    return _mod("blocks_eval", lambda: Blocks().eval()).seq[:2](x)


@case(A)
def module_list_len_index(x):
    m = _mod("blocks_eval", lambda: Blocks().eval())
    return m.layers[len(m.layers) - 1](x)


@case(A)
def module_named_parameters(x):
    m = _mod("mlp", MLP)
    total = x
    for name, p in m.named_parameters():
        if "weight" in name:
            total = total + p.sum()
    return total


@case(A)
def module_parameters_iter(x):
    return x + sum(p.sum() for p in _mod("mlp", MLP).parameters())


@case(A)
def module_moduledict_items(x):
    m = _mod("blocks_eval", lambda: Blocks().eval())
    for k, norm in m.norms.items():
        x = norm(x)
    return x


@case(inp((2, 3, 8, 8)))
def module_conv_bn(x):
    m = _mod(
        "convbn",
        lambda: torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()
        ).eval(),
    )
    return m(x)


@case(inp((2, 3, 8, 8)))
def module_conv_bn_train(x):
    m = _mod(
        "convbn_train",
        lambda: torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)),
    )
    return m(x)


@case(lambda g, v: (torch.randint(0, 10, (2, 5 + v), generator=g),))
def module_embedding(ids):
    return _mod("emb", lambda: torch.nn.Embedding(10, 4))(ids)


@case(inp((2, 5, 8), grow=0))
def module_mha(x):
    m = _mod("mha", lambda: torch.nn.MultiheadAttention(8, 2, batch_first=True).eval())
    return m(x, x, x, need_weights=False)[0]


@case(A)
def module_dropout_train(x):
    return _mod("drop", lambda: torch.nn.Dropout(0.5))(x)


@case(A)
def module_attribute_config(x):
    m = _mod("mlp", MLP)
    return x * m.fc1.in_features + m.fc1.weight.shape[0]


@case(inp((3, 4), rg=True))
def module_with_grad_input(x):
    return _mod("mlp", MLP)(x)


# ---------------------------------------------------------------- grad contexts and in-place
@case(A)
def no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    return y + 1


@case(inp((3, 4), rg=True))
def no_grad_with_requires_grad(x):
    with torch.no_grad():
        y = x * 2
    return y + x


@case(inp((3, 4), rg=True))
def enable_grad_inside_no_grad(x):
    with torch.no_grad():
        with torch.enable_grad():
            y = x * 2
        z = x * 3
    return y, z


@case(inp((3, 4), rg=True))
def set_grad_enabled_ctx(x):
    with torch.set_grad_enabled(False):
        y = x + 1
    return y


@case(A)
def inplace_on_intermediate(x):
    y = x + 0
    y.relu_()
    y.mul_(2)
    return y


@case(A)
def inplace_on_input(x):
    x.add_(1)
    return x * 2


@case(A)
def inplace_operator_on_input(x):
    x += 1
    return x


@case(A)
def inplace_alias_view(x):
    y = x.clone()
    v = y[0]
    v.zero_()
    return y


@case(inp((3, 4), rg=True))
def requires_grad_flow(x):
    return (x * 2).sum()


@case(A)
def detach_requires_grad(x):
    return x.detach().requires_grad_(False) * 2


@case(A)
def f_relu_inplace_kw(x):
    y = x.clone()
    return F.relu(y, inplace=True)


# ---------------------------------------------------------------- autocast
@case(lambda g, v: (torch.randn(3 + v, 4, generator=g), torch.randn(4, 5, generator=g)))
def autocast_cpu_bf16(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        z = F.linear(x, w.t())
    return y, z, (y.float() + 1).dtype


@case(lambda g, v: (torch.randn(3 + v, 4, generator=g), torch.randn(4, 5, generator=g)))
def autocast_disabled_inside(x, w):
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        a = x @ w
        with torch.autocast(device_type="cpu", enabled=False):
            b = x @ w
    return a, b


@case(A)
def autocast_cpu_amp_class(x):
    with torch.cpu.amp.autocast():
        return torch.mm(x, x.t())


# ---------------------------------------------------------------- function objects as values
def _log_usage_once(obj):
    """torchvision's logging helper: reads type(fn).__name__ of a function it is given."""
    module = obj.__module__
    name = obj.__class__.__name__
    if isinstance(obj, type(_log_usage_once)):
        name = obj.__name__
    return f"{module}.{name}"


@case(A)
def function_class_attribute(x):
    label = _log_usage_once(function_class_attribute)
    return x * len(label)


@case(A)
def nested_function_class_attribute(x):
    def inner(t):
        return t + 1

    return inner(x) * len(inner.__class__.__name__)
