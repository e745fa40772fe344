"""``contextlib.contextmanager`` context managers that change state around the body: the
code before the ``yield`` runs at ``with``, the code after it when the body ends (also on an
early ``return``), so the body sees the changed state and the code after the block the
restored one, as in eager."""

import contextlib
import sys
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from _objects_common import breaks, check  # noqa: E402

STATE = {"scale": 1.0}
FLAG = False
LEVEL = 0
flags = types.ModuleType("danlu_test_flags")
flags.on = False
sys.modules["danlu_test_flags"] = flags


def _state(reset=False):
    global FLAG, LEVEL
    if reset:
        STATE["scale"] = 1.0
        FLAG = False
        LEVEL = 0
        flags.on = False
        return None
    return {"scale": STATE["scale"], "flag": FLAG, "level": LEVEL, "mod": flags.on}


@contextlib.contextmanager
def scaled(s):
    old = STATE["scale"]
    STATE["scale"] = s
    try:
        yield s
    finally:
        STATE["scale"] = old


@contextlib.contextmanager
def flag_on():
    global FLAG
    FLAG = True
    yield
    FLAG = False


@contextlib.contextmanager
def deeper():
    global LEVEL
    LEVEL += 1
    try:
        yield LEVEL
    finally:
        LEVEL -= 1


@contextlib.contextmanager
def attr(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield obj
    finally:
        setattr(obj, name, old)


@contextlib.contextmanager
def module_flag():
    import danlu_test_flags

    danlu_test_flags.on = True
    try:
        yield
    finally:
        danlu_test_flags.on = False


@contextlib.contextmanager
def swallow(kind):
    try:
        yield
    except kind:
        pass


class Cfg:
    def __init__(self):
        self.on = False
        self.scale = 1.0


def _t(g, *shape):
    return torch.randn(*shape, generator=g)


def test_scale_set_and_restored_around_the_body():
    def f(x):
        with scaled(3.0) as s:
            y = x * STATE["scale"] + s
        return y * STATE["scale"], STATE["scale"]

    opt, c = check(f, lambda g: (_t(g, 4),), state=_state)
    assert len(c.graphs) == 1 and not breaks(opt)


def test_global_flag_set_and_restored():
    def f(x):
        with flag_on():
            y = x + 1 if FLAG else x - 1
        return y * (2 if FLAG else 3), FLAG

    opt, c = check(f, lambda g: (_t(g, 4),), state=_state)
    assert len(c.graphs) == 1 and not breaks(opt)


def test_attribute_set_and_restored_nested():
    def f(x, cfg):
        with attr(cfg, "on", True):
            with scaled(2.0):
                with attr(cfg, "scale", 5.0) as c:
                    y = x * STATE["scale"] * c.scale if cfg.on else x
            z = y + cfg.scale
        return z, cfg.on, cfg.scale, STATE["scale"]

    opt, c = check(f, lambda g: (_t(g, 4), Cfg()), state=_state)
    assert len(c.graphs) == 1 and not breaks(opt)


def test_nested_same_manager_counts_depth():
    def f(x):
        with deeper() as a:
            with deeper() as b:
                y = x * LEVEL + a + b
            y = y * LEVEL
        return y, LEVEL

    opt, c = check(f, lambda g: (_t(g, 3),), state=_state)
    assert len(c.graphs) == 1 and not breaks(opt)


def test_early_return_from_the_body_restores():
    def f(x, early):
        with scaled(5.0):
            if early:
                return x * STATE["scale"]
            y = x - STATE["scale"]
        return y * STATE["scale"]

    check(f, lambda g: (_t(g, 3), True), state=_state)
    check(f, lambda g: (_t(g, 3), False), state=_state)


def test_body_exception_caught_by_the_manager():
    def f(x):
        with swallow(ValueError):
            y = x + 1
            raise ValueError("stop")
        return y * 2

    check(f, lambda g: (_t(g, 3),), state=_state)

    def g_(x):
        with swallow(KeyError):
            y = x + 1
            if y.sum() > 1000:
                raise KeyError("k")
        with scaled(2.0):
            return y * STATE["scale"]

    check(g_, lambda g: (_t(g, 3),), state=_state)


def test_exception_not_caught_propagates_and_state_is_restored():
    def f(x):
        with scaled(4.0):
            y = x * STATE["scale"]
            raise KeyError("boom")
        return y

    check(f, lambda g: (_t(g, 3),), state=_state)


def test_module_attribute_flag():
    def f(x):
        with module_flag():
            y = x * 2 if flags.on else x
        return y, flags.on

    check(f, lambda g: (_t(g, 3),), state=_state)


@scaled(7.0)
def _decorated(x):
    return x * STATE["scale"]


def test_contextmanager_as_a_decorator():
    def f(x):
        return _decorated(x) + STATE["scale"]

    opt, c = check(f, lambda g: (_t(g, 3),), state=_state)
    assert not breaks(opt)


def test_contextmanager_defined_in_the_compiled_function():
    def f(x, cfg):
        @contextlib.contextmanager
        def doubled():
            cfg.scale = cfg.scale * 2
            yield cfg.scale
            cfg.scale = cfg.scale / 2

        with doubled() as s:
            y = x * cfg.scale + s
        return y, cfg.scale

    opt, c = check(f, lambda g: (_t(g, 3), Cfg()), state=_state)
    assert not breaks(opt)


def test_graph_break_inside_the_body_is_still_right():
    def f(x):
        with scaled(3.0):
            y = x * STATE["scale"]
            print("inside")
            y = y + STATE["scale"]
        return y * STATE["scale"], STATE["scale"]

    check(f, lambda g: (_t(g, 3),), state=_state)


@contextlib.contextmanager
def yields_twice():
    yield 1
    yield 2


@contextlib.contextmanager
def never_yields():
    if False:
        yield


def test_misbehaving_generators_raise_like_eager():
    def f(x):
        with yields_twice():
            y = x + 1
        return y

    check(f, lambda g: (_t(g, 3),))

    def h(x):
        with never_yields():
            y = x + 1
        return y

    check(h, lambda g: (_t(g, 3),))


@contextlib.contextmanager
def no_grad_inside():
    with torch.no_grad():
        yield


def test_grad_mode_switched_inside_the_generator():
    def f(x):
        with no_grad_inside():
            y = x * 2
        z = x * 3
        return y, z, y.requires_grad, z.requires_grad, torch.is_grad_enabled()

    opt, c = check(f, lambda g: (_t(g, 3).requires_grad_(),))
    assert not breaks(opt)


def test_manager_object_made_before_the_with():
    def f(x):
        cm = scaled(6.0)
        y = x + STATE["scale"]
        with cm as s:
            y = y * STATE["scale"] + s
        return y, STATE["scale"]

    opt, c = check(f, lambda g: (_t(g, 3),), state=_state)
    assert not breaks(opt)


@contextlib.contextmanager
def noisy_enter():
    print("enter")
    STATE["scale"] = 9.0
    yield
    STATE["scale"] = 1.0


@contextlib.contextmanager
def noisy_exit():
    STATE["scale"] = 8.0
    try:
        yield
    finally:
        print("exit")
        STATE["scale"] = 1.0


def test_graph_break_inside_the_generator_is_still_right():
    def f(x):
        with noisy_enter():
            y = x * STATE["scale"]
        with noisy_exit():
            z = y + STATE["scale"]
        return z * STATE["scale"], STATE["scale"]

    check(f, lambda g: (_t(g, 3),), state=_state)


_EXEC_SOURCE = """
import contextlib
STATE = {"scale": 1.0, "calls": 0}

@contextlib.contextmanager
def scaled(k):
    old = STATE["scale"]
    STATE["scale"] = old * k
    try:
        yield STATE["scale"]
    finally:
        STATE["scale"] = old

def bump():
    STATE["calls"] += 1

def f(x):
    with scaled(3.0) as s:
        y = x * STATE["scale"] + s
    bump()
    return y, STATE["scale"], STATE["calls"]
"""


def test_module_not_in_sys_modules_keeps_global_writes():
    """Code exec'd into a namespace (no entry in sys.modules): the manager and a helper read
    the frame's own globals; their writes to a global dict are replayed."""
    import danlu_dynamo

    eager_ns, comp_ns = {"__name__": "danlu_exec_e"}, {"__name__": "danlu_exec_c"}
    exec(compile(_EXEC_SOURCE, "<exec_e>", "exec"), eager_ns)
    exec(compile(_EXEC_SOURCE, "<exec_c>", "exec"), comp_ns)
    opt = danlu_dynamo.optimize("eager")(comp_ns["f"])
    for _ in range(3):
        x = torch.randn(3)
        e, c = eager_ns["f"](x), opt(x)
        assert torch.equal(e[0], c[0]) and e[1:] == c[1:]
        assert eager_ns["STATE"] == comp_ns["STATE"]
