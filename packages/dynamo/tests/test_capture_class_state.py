"""State kept on user classes (counters, scales, registries): reads of class attributes are
guarded, so a value changed on the class is seen; writes made in the traced code
(``Cls.count += 1``, ``type(self).n += 1``, ``cls.n = v`` in a classmethod) are replayed
after the graph, so instances and later calls read the new value."""

import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))

from _objects_common import breaks, check  # noqa: E402


def _t(g, *shape):
    return torch.randn(*shape, generator=g)


class Counted:
    count = 0

    def __init__(self, t):
        type(self).count += 1
        self.id = Counted.count
        self.t = t

    def read(self):
        return self.count


def _counted_state(reset=False):
    if reset:
        Counted.count = 0
        return None
    return {"count": Counted.count}


def test_counter_bumped_in_init_of_objects_made_in_the_trace():
    def f(x):
        a = Counted(x)
        b = Counted(x * 2)
        return a.t * a.id + b.t * b.id, a.read(), b.read(), Counted.count

    opt, c = check(f, lambda g: (_t(g, 3),), calls=4, state=_counted_state)
    assert not breaks(opt)


def test_counter_read_without_state_reset_sees_every_call():
    """No reset between calls: each call must see the counter the previous one left."""

    def f(x):
        o = Counted(x)
        return o.t + o.id, o.read()

    Counted.count = 0
    eager = [f(torch.ones(2))[1] for _ in range(5)]
    Counted.count = 0
    import danlu_dynamo

    opt = danlu_dynamo.optimize("eager")(f)
    got = [opt(torch.ones(2))[1] for _ in range(5)]
    assert got == eager == [1, 2, 3, 4, 5]
    assert Counted.count == 5


class Bumper:
    count = 0

    def bump(self, x):
        Bumper.count += 1
        return x * self.count

    def bump_cls(self, x):
        self.__class__.count += 2
        return x + type(self).count

    @classmethod
    def reset_to(cls, n):
        cls.count = n


def _bumper_state(reset=False):
    if reset:
        Bumper.count = 0
        return None
    return {"count": Bumper.count}


def test_counter_bumped_through_the_class_name_self_class_and_classmethod():
    def f(o, x):
        y = o.bump(x)
        z = o.bump_cls(y)
        n1 = o.count
        o.reset_to(7)
        w = o.bump(z)
        return w, n1, o.count, Bumper.count

    opt, c = check(f, lambda g: (Bumper(), _t(g, 3)), calls=4, state=_bumper_state)
    assert not breaks(opt)


class Base:
    n = 1


class Child(Base):
    pass


class Shadow(Base):
    n = 100


def _base_state(reset=False):
    if reset:
        Base.n = 1
        return None
    return {"base": Base.n, "shadow": Shadow.n, "child": "n" in Child.__dict__}


def test_subclass_sees_write_to_base_unless_it_shadows():
    def f(c, s, x):
        before = c.n + s.n
        Base.n = Base.n + 5
        return x * c.n, s.n, before, Child.n

    opt, c = check(f, lambda g: (Child(), Shadow(), _t(g, 2)), calls=3, state=_base_state)
    assert not breaks(opt)


class Scale:
    factor = 2.0

    def apply(self, x):
        return x * self.factor


def test_class_attribute_changed_between_calls_is_seen():
    import danlu_dynamo

    def f(x):
        return Scale().apply(x)  # an object made in the trace reads the class

    opt = danlu_dynamo.optimize("eager")(f)
    x = torch.randn(3)
    for factor in (2.0, 3.0, 2.0, -1.5):
        Scale.factor = factor
        assert torch.equal(opt(x), f(x)), factor
    Scale.factor = 2.0


class Layer(nn.Module):
    calls = 0

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        type(self).calls += 1
        return self.lin(x) * Layer.calls


def test_module_with_class_level_counter():
    import danlu_dynamo

    m = Layer()
    Layer.calls = 0
    x = torch.randn(2, 4)
    eager = [m(x) for _ in range(3)]
    Layer.calls = 0
    opt = danlu_dynamo.optimize("eager")(m)
    got = [opt(x) for _ in range(3)]
    assert Layer.calls == 3
    for e, g in zip(eager, got):
        assert torch.allclose(e, g)


class Registry:
    names = ()

    @classmethod
    def add(cls, name):
        cls.names = cls.names + (name,)
        return len(cls.names)


def _registry_state(reset=False):
    if reset:
        Registry.names = ()
        return None
    return {"names": Registry.names}


def test_tuple_registry_on_the_class():
    def f(x):
        n = Registry.add("a")
        m = Registry.add("b")
        return x * (n + m), Registry.names

    check(f, lambda g: (_t(g, 2),), calls=3, state=_registry_state)


class Meta(type):
    def __setattr__(cls, name, value):
        super().__setattr__(name, value * 10)


class WithMeta(metaclass=Meta):
    n = 0


def _meta_state(reset=False):
    if reset:
        type.__setattr__(WithMeta, "n", 0)
        return None
    return {"n": WithMeta.n}


def test_metaclass_setattr_runs_eagerly():
    def f(x):
        WithMeta.n = 3
        return x + WithMeta.n

    opt, _ = check(f, lambda g: (_t(g, 2),), state=_meta_state)
    assert breaks(opt)


class Tracker:
    seen: list = []
    by_name: dict = {}

    def __init__(self, name, t):
        self.seen.append(name)
        self.by_name[name] = len(self.seen)
        self.t = t


def _tracker_state(reset=False):
    if reset:
        Tracker.seen.clear()
        Tracker.by_name.clear()
        return None
    return {"seen": list(Tracker.seen), "by_name": dict(Tracker.by_name)}


def test_class_level_containers_mutated_through_objects_made_in_the_trace():
    def f(x):
        a = Tracker("a", x)
        b = Tracker("b", x * 2)
        return a.t + b.t * len(Tracker.seen), Tracker.by_name["b"]

    check(f, lambda g: (_t(g, 3),), state=_tracker_state)
