"""Dicts whose keys are not literals: computed ints/strings/tuples, enum members, classes,
functions, Python modules and nn.Module objects, in dicts made in the frame and passed in."""

import enum
import math

import torch
from _containers_common import Counter, rand, run_both

import danlu_dynamo


class Color(enum.Enum):
    RED = 1
    BLUE = 2


_relu, _lin = torch.nn.ReLU(), torch.nn.Linear(4, 4)


def _x(gen):
    return (rand(gen, 3, 4),)


def test_computed_constant_keys():
    def f(x):
        d = {}
        for i in range(3):
            d[i * 2] = x * i
        names = {f"layer{i}": i for i in range(2)}
        tup = {(i, "w"): x + i for i in range(2)}
        d[x.shape[1]] = x.sum()
        return d, names, tup[(1, "w")], {k: v for k, v in names.items() if v}, d.get(4)

    run_both(f, _x, expect_graphs=1)


def test_enum_class_function_and_module_keys():
    def f(x):
        by_color = {Color.RED: x, Color.BLUE: x * 2}
        by_type = {int: "int", torch.Tensor: "tensor", Color: "enum"}
        by_fn = {torch.relu: 1, math.sqrt: 2}
        by_mod = {_relu: x.sin(), _lin: x.cos(), math: 3}
        kinds = [by_type[type(v)] for v in (1, x)]
        r = by_color[Color.BLUE] + by_mod[_relu] + by_mod[_lin]
        return r, kinds, by_fn[torch.relu], by_mod[math], Color.RED in by_color, _relu in by_mod

    run_both(f, _x, expect_graphs=1)


def test_modules_as_keys_apply_each():
    def f(x):
        acts = {_relu: 1.0, torch.nn.functional.gelu: 2.0}
        out = x
        for fn, scale in acts.items():
            out = out + fn(x) * scale
        return out, len(acts)

    run_both(f, _x, expect_graphs=1)


def test_input_dict_with_enum_and_module_keys():
    def f(x, cfg):
        return x * cfg[Color.RED] + cfg[_relu](x), [k for k in cfg if isinstance(k, Color)]

    def inputs(gen):
        return rand(gen, 3, 4), {Color.RED: 2.0, _relu: _relu, (1, "a"): 0}

    be = run_both(f, inputs, expect_graphs=1)
    opt = danlu_dynamo.optimize(be)(f)
    x = torch.randn(3, 4)
    # another key, or the same keys in another order: guarded, run again, right values
    other = {Color.BLUE: 5.0, Color.RED: 3.0, _relu: _relu}
    torch.testing.assert_close(opt(x, other)[0], f(x, other)[0])
    assert opt(x, other)[1] == f(x, other)[1]


def test_input_dict_mutated_with_computed_keys():
    def f(x, d):
        for c in (Color.RED, Color.BLUE):
            d[c] = d.get(c, 0) + 1
        d[("sum", 1)] = x.sum()
        return len(d)

    def inputs(gen):
        return rand(gen, 2), {Color.RED: 5}

    run_both(f, inputs, expect_graphs=1)


def test_user_object_keys_guarded_by_identity():
    class Tag:
        pass

    a, b = Tag(), Tag()

    def f(x, k):
        d = {a: 1.0, b: 2.0}
        return x * d[k]

    opt = danlu_dynamo.optimize(Counter())(f)
    x = torch.randn(3)
    for k in (a, b, a):
        torch.testing.assert_close(opt(x, k), f(x, k))


def test_unhashable_or_tensor_keys_break_cleanly():
    def f(x):
        d = {x: 1}  # tensors hash by identity: eager runs it
        return d[x] + 1, x * 2

    run_both(f, _x, expect_breaks=None)


def test_input_dict_with_module_keys_applied():
    lin = torch.nn.Linear(4, 4)

    def f(x, d):
        for m, s in d.items():
            x = m(x) * s
        return x

    be = run_both(f, lambda g: (rand(g, 2, 4), {lin: 2.0, _relu: 0.5}), expect_graphs=1)
    opt = danlu_dynamo.optimize(be)(f)
    with torch.no_grad():
        lin.weight.mul_(-1)  # parameters are graph inputs, read from the key at run time
    x = torch.randn(2, 4)
    torch.testing.assert_close(opt(x, {lin: 2.0, _relu: 0.5}), f(x, {lin: 2.0, _relu: 0.5}))
