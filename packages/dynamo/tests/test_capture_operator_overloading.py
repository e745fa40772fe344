"""User classes with operator overloading on objects holding tensors: the captured program
follows Python's protocol (left method, NotImplemented -> reflected method of the right
operand, a subclass's reflected method first, in-place falling back to the binary form,
``==`` falling back to identity), and agrees with eager."""

import dataclasses
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from _objects_common import breaks, check  # noqa: E402


class Vec:
    def __init__(self, t):
        self.t = t

    def __eq__(self, other):
        if not isinstance(other, Vec):
            return NotImplemented
        return self.t.shape == other.t.shape

    def __lt__(self, other):
        if not isinstance(other, Vec):
            return NotImplemented
        return self.t.numel() < other.t.numel()

    def __add__(self, other):
        if isinstance(other, Vec):
            return Vec(self.t + other.t)
        if isinstance(other, (int, float, torch.Tensor)):
            return Vec(self.t + other)
        return NotImplemented

    def __radd__(self, other):
        return Vec(other + self.t * 2)

    def __mul__(self, k):
        return Vec(self.t * k)

    __rmul__ = __mul__

    def __matmul__(self, other):
        return self.t @ (other.t if isinstance(other, Vec) else other)

    def __neg__(self):
        return Vec(-self.t)

    def __abs__(self):
        return Vec(self.t.abs())


class SubVec(Vec):
    def __radd__(self, other):
        return SubVec(other.t * 10 + self.t if isinstance(other, Vec) else other + self.t)


class PlainSub(Vec):
    pass


class Acc:
    """In-place add that mutates the object."""

    def __init__(self, t):
        self.t = t
        self.n = 0

    def __iadd__(self, other):
        self.t = self.t + (other.t if isinstance(other, Acc) else other)
        self.n += 1
        return self


class NoIadd:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        return NoIadd(self.t + other)


class IaddNotImpl(NoIadd):
    def __iadd__(self, other):
        if isinstance(other, torch.Tensor):
            return NotImplemented
        self.t = self.t * other
        return self


class NoEq:
    def __init__(self, t):
        self.t = t


class EqNotImpl:
    def __init__(self, t):
        self.t = t

    def __eq__(self, other):
        return NotImplemented


def _t(g, *shape):
    return torch.randn(*shape, generator=g)


def _two_vecs(g):
    x = _t(g, 3, 4)
    return (Vec(x), Vec(x * 2))


def test_eq_and_default_ne_from_user_eq():
    def f(a, b):
        return a == b, a != b, b == a, a == 3, 3 == a, a != 3, a == a

    opt, c = check(f, _two_vecs)
    assert len(c.graphs) <= 1 and not breaks(opt)


def test_comparison_reflected_and_ordering():
    def f(a, b):
        # only __lt__ exists: b > a is a.__lt__(b)
        return b > a, a < b, (a > b), sorted([a.t.numel(), b.t.numel()])

    opt, _ = check(f, _two_vecs)
    assert not breaks(opt)


def test_comparison_without_methods_raises_type_error_like_eager():
    def f(a, b):
        return a.t + 1, a <= b

    opt, _ = check(f, lambda g: (NoEq(_t(g, 2)), NoEq(_t(g, 2))))


def test_eq_falls_back_to_identity():
    def f(a, b):
        c = a
        return a == b, a == c, a != b, a != c, [a == x for x in (a, b)], a.t + 1

    check(f, lambda g: (NoEq(_t(g, 2)), NoEq(_t(g, 2))))
    check(f, lambda g: (EqNotImpl(_t(g, 2)), EqNotImpl(_t(g, 2))))

    def made_inside(x):
        a, b = NoEq(x), EqNotImpl(x)
        return a == a, a == b, b == a, b == b, b != b, x * 2

    opt, c = check(made_inside, lambda g: (_t(g, 3),))
    assert len(c.graphs) == 1 and not breaks(opt)


def test_binary_and_reflected_with_tensors_and_numbers():
    def f(a, x):
        r1 = a + x  # Vec.__add__
        r2 = x + a  # Tensor.__add__ -> NotImplemented -> Vec.__radd__
        r3 = 1.5 + a  # float -> Vec.__radd__
        r4 = 3 * a  # __rmul__
        r5 = a @ x.t()
        r6 = -a
        r7 = abs(a)
        return r1.t, r2.t, r3.t, r4.t, r5, r6.t, r7.t

    opt, c = check(f, lambda g: (Vec(_t(g, 3, 4)), _t(g, 3, 4)))
    assert len(c.graphs) == 1 and not breaks(opt)


def test_subclass_reflected_method_goes_first():
    def f(a, b, c):
        r1 = a + b  # SubVec overrides __radd__: it runs first
        r2 = a + c  # PlainSub does not override: Vec.__add__ runs
        r3 = b + a  # same rule does not apply the other way: SubVec.__add__ (inherited)
        return type(r1).__name__, r1.t, type(r2).__name__, r2.t, type(r3).__name__, r3.t

    def args(g):
        x = _t(g, 2, 3)
        return Vec(x), SubVec(x + 1), PlainSub(x - 1)

    opt, c = check(f, args)
    assert len(c.graphs) == 1 and not breaks(opt)


def test_inplace_mutates_the_object_and_aliases_see_it():
    def f(a, b, x):
        alias = a
        a += b
        a += x
        return alias is a, alias.n, a.t

    opt, c = check(f, lambda g: (Acc(_t(g, 4)), Acc(_t(g, 4)), _t(g, 4)))
    assert len(c.graphs) == 1 and not breaks(opt)


def test_inplace_falls_back_to_binary_form():
    def f(a, x):
        alias = a
        a += x  # no __iadd__: a = a + x, a new object
        return alias is a, alias.t, a.t

    check(f, lambda g: (NoIadd(_t(g, 4)), _t(g, 4)))

    def g_(a, x):
        alias = a
        a += x  # __iadd__ answers NotImplemented for a tensor: __add__
        b = alias
        b += 2  # __iadd__ handles a number in place
        return alias is a, alias is b, alias.t, a.t, b.t

    check(g_, lambda g: (IaddNotImpl(_t(g, 4)), _t(g, 4)))


def test_inplace_on_tensor_with_user_object_uses_reflected():
    def f(x, a):
        y = x
        y += a  # Tensor.__iadd__ -> NotImplemented -> Vec.__radd__
        return type(y).__name__, y.t, x

    check(f, lambda g: (_t(g, 3), Vec(_t(g, 3))))


class Bag:
    def __init__(self, *ts):
        self.ts = list(ts)

    def __len__(self):
        return len(self.ts)

    def __getitem__(self, i):
        return self.ts[i]

    def __contains__(self, k):
        return k < len(self.ts)

    def __call__(self, x):
        return sum(t * x for t in self.ts)


class Seq:
    """No __contains__ / __iter__: ``in`` and iteration go through __getitem__/__len__."""

    def __init__(self, *items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class Flag:
    def __init__(self, on, t):
        self.on = on
        self.t = t

    def __bool__(self):
        return self.on


class TensorTruth:
    def __init__(self, t):
        self.t = t

    def __bool__(self):
        return bool(self.t.sum() > 0)


def test_len_getitem_contains_call():
    def f(b, x):
        out = []
        if b:
            out.append(len(b))
        out.append(b[0] + b[-1])
        out.append(1 in b)
        out.append(7 in b)
        out.append(b(x))
        return out

    opt, c = check(f, lambda g: (Bag(_t(g, 3), _t(g, 3)), _t(g, 3)))
    assert len(c.graphs) == 1 and not breaks(opt)

    def empty(b, x):
        return (x + 1) if b else (x - 1)

    check(empty, lambda g: (Bag(), _t(g, 3)))


def test_contains_without_dunder_iterates():
    def f(s, x):
        return 2 in s, 5 in s, "a" in s, x * len(s)

    opt, c = check(f, lambda g: (Seq(1, 2, "a"), _t(g, 2)))
    assert not breaks(opt)


def test_bool_on_objects():
    def f(a, b, x):
        y = x
        if a:
            y = y + 1
        if not b:
            y = y * 2
        return y, bool(a), bool(b)

    opt, c = check(f, lambda g: (Flag(True, _t(g, 2)), Flag(False, _t(g, 2)), _t(g, 2)))
    assert len(c.graphs) == 1 and not breaks(opt)


def test_bool_that_reads_tensor_data_breaks_and_is_right():
    def f(a, x):
        if a:
            return x + 1
        return x - 1

    opt, _ = check(f, lambda g: (TensorTruth(_t(g, 5)), _t(g, 2)), calls=6)


class BadBool:
    def __bool__(self):
        return 1


def test_bool_returning_non_bool_raises_like_eager():
    def f(a, x):
        return x + 1 if a else x

    check(f, lambda g: (BadBool(), _t(g, 2)))


def test_missing_operator_raises_type_error_like_eager():
    def f(a, x):
        y = x * 2
        return a + y

    check(f, lambda g: (NoEq(_t(g, 2)), _t(g, 2)))


@dataclasses.dataclass
class Point:
    x: int
    y: int


def test_dataclass_eq_and_objects_made_in_the_trace():
    def f(p, x):
        q = Point(p.x, p.y)
        r = Point(p.y, p.x)
        return p == q, p == r, q != r, x * (p == q)

    check(f, lambda g: (Point(1, 2), _t(g, 2)))
    check(f, lambda g: (Point(3, 3), _t(g, 2)))


class Money:
    def __init__(self, cents):
        self.cents = cents

    def __eq__(self, other):
        return isinstance(other, Money) and self.cents == other.cents

    def __hash__(self):
        return hash(self.cents)

    def __lt__(self, other):
        return self.cents < other.cents

    def __le__(self, other):
        return self.cents <= other.cents


@pytest.mark.parametrize("pair", [(1, 1), (1, 2), (2, 1)])
def test_all_comparisons_on_value_objects(pair):
    def f(a, b, x):
        r = [a == b, a != b, a < b, a <= b, a > b, a >= b]
        return r, x + sum(r)

    check(f, lambda g: (Money(pair[0]), Money(pair[1]), _t(g, 2)))
