"""Classes with a custom ``__new__`` or a metaclass: their objects (inputs or made in the
trace) no longer drop capture for the whole frame. ``Cls(...)`` follows ``type.__call__``:
a Python ``__new__`` is inlined (``super().__new__``/``object.__new__`` make the object),
``__init__`` runs when the result is an instance, a metaclass ``__call__`` is inlined."""

import abc
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from _objects_common import breaks, check  # noqa: E402


class Registering(type):
    names: list = []

    def __new__(mcs, name, bases, ns):
        cls = super().__new__(mcs, name, bases, ns)
        mcs.names.append(name)
        return cls


class Registered(metaclass=Registering):
    scale = 2.0

    def __init__(self, t):
        self.t = t

    def scaled(self):
        return self.t * self.scale


class Tagging(type):
    def __call__(cls, *args, **kwargs):
        obj = super().__call__(*args, **kwargs)
        obj.tag = cls.__name__
        return obj


class Tagged(metaclass=Tagging):
    def __init__(self, t, k=1):
        self.t = t * k


class WithNew:
    def __new__(cls, t, *rest):
        obj = super().__new__(cls)
        obj.made_by_new = True
        return obj

    def __init__(self, t, k=1.0):
        self.t = t * k


class ObjectNew:
    def __new__(cls, t):
        obj = object.__new__(cls)
        obj.t0 = t
        return obj


class NotAnInstance:
    def __new__(cls, t):
        return t * 3  # __init__ is not called

    def __init__(self, t):
        raise AssertionError("not called")


class Base(abc.ABC):
    @abc.abstractmethod
    def value(self): ...


class Impl(Base):
    def __init__(self, t):
        self.t = t

    def value(self):
        return self.t.sum()


def _t(g, *shape):
    return torch.randn(*shape, generator=g)


def test_input_objects_of_classes_with_a_metaclass_are_captured():
    def f(x, r):
        return x * r.scale + r.scaled(), type(r).__name__

    opt, c = check(f, lambda g: (_t(g, 3), Registered(_t(g, 3))))
    assert len(c.graphs) == 1 and not breaks(opt)


def test_objects_made_in_the_trace():
    def f(x):
        a = WithNew(x, 2.0)
        b = ObjectNew(x + 1)
        c = NotAnInstance(x)
        d = Tagged(x, k=3)
        e = Registered(x)
        i = Impl(x)
        return a.t, a.made_by_new, b.t0, c, d.t, d.tag, e.scaled(), i.value(), isinstance(i, Base)

    opt, c = check(f, lambda g: (_t(g, 4),))
    assert len(c.graphs) == 1 and not breaks(opt)


def test_objects_with_custom_new_returned_from_the_graph():
    def f(x):
        a = WithNew(x.sin())
        d = Tagged(x.cos())
        return a, d

    opt, c = check(f, lambda g: (_t(g, 4),))
    assert len(c.graphs) == 1 and not breaks(opt)


class Cached:
    _instance = None

    def __new__(cls, t):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
            cls._instance.n = 0
        return cls._instance

    def __init__(self, t):
        self.n += 1
        self.t = t


def _cached_state(reset=False):
    if reset:
        Cached._instance = None
        return None
    inst = Cached._instance
    return None if inst is None else {"n": inst.n}


def test_singleton_new_with_class_state():
    def f(x):
        a = Cached(x)
        b = Cached(x * 2)
        return a is b, a.n, b.t

    check(f, lambda g: (_t(g, 2),), state=_cached_state)
