"""Guards: the conditions under which a compiled frame may be reused, as ONE check function.

A :class:`GuardBuilder` collects guards on the values a frame saw at entry — written as sources
like ``L['x']`` (a local), ``G['name']`` (a global), ``L['self'].layer.weight`` or
``L['xs'][0]`` — and on global state (grad mode, autocast, deterministic algorithms).
:meth:`GuardBuilder.build` writes the Python source of a single function ``check_fn(L)``,
compiles it once and returns it; objects a guard compares against (types, tensors' dtypes,
identities) reach it through a closure. The frame hook calls it on every call of the frame, so
it reads each source once, tests the cheapest conditions first and stops at the first false one.

The check function also carries:

- ``check_fn.guards``: the :class:`GuardSet`; ``print(check_fn.guards)`` shows one line per
  guard, with the user's source location when one was given;
- ``check_fn.failure_reason(f_locals)``: the first failing guard, described, or None;
- ``check_fn.source``: the generated Python source.

torch is imported lazily: the module imports without torch, and only tensor and global-state
guards need it.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Guard", "GuardSet", "GuardBuilder", "CheckFn", "parse_source"]

# Values a constant guard may embed by equality (with an exact type check).
_CONSTANT_TYPES = (type(None), bool, int, float, complex, str, bytes, range, type(Ellipsis))


_UNSET = object()  # "read the value from the frame"


def _torch():
    import torch

    return torch


# ---- sources ----------------------------------------------------------------------------


def parse_source(source: str) -> ast.expr:
    """Parse and check a source: ``L[...]`` / ``G[...]`` followed by attributes and constant
    subscripts. Anything else is refused (a source becomes code in the check function)."""
    try:
        tree = ast.parse(source, mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"guard source {source!r} is not an expression: {e}") from None
    node, child = tree, None
    while True:
        if isinstance(node, ast.Attribute):
            child, node = node, node.value
        elif isinstance(node, ast.Subscript):
            key = node.slice
            if isinstance(key, ast.UnaryOp) and isinstance(key.op, ast.USub):
                key = key.operand
            if not isinstance(key, ast.Constant) or not isinstance(key.value, (str, int)):
                raise ValueError(f"guard source {source!r}: subscripts must be str/int constants")
            child, node = node, node.value
        elif isinstance(node, ast.Name):
            if node.id not in ("L", "G"):
                raise ValueError(f"guard source {source!r} must start with L[...] or G[...]")
            if not isinstance(child, ast.Subscript):
                raise ValueError(f"guard source {source!r}: index the scope first: L['x']")
            break
        else:
            raise ValueError(
                f"guard source {source!r}: only attributes and constant subscripts are allowed"
            )
    return tree


# ---- one guard --------------------------------------------------------------------------


@dataclass(eq=False)
class Guard:
    """One condition. ``expr`` is a Python expression over ``{v}`` (the source's value) and
    the names in ``captures``; ``text`` is its printable form."""

    kind: str
    source: str | None
    expr: str
    text: str
    captures: dict[str, Any] = field(default_factory=dict)
    location: str | None = None
    explain: Callable[[Any], str] | None = None  # detail for a failing value

    def __str__(self) -> str:
        where = f"  # {self.location}" if self.location else ""
        return f"{self.text}{where}"

    def check_value(self, value) -> bool:
        if not hasattr(self, "_single"):
            env = dict(self.captures)
            self._single = eval(f"lambda ___v: {self.expr.format(v='___v')}", env)  # noqa: S307
        return bool(self._single(value))


class GuardSet:
    """The guards of one cache entry, in check order."""

    def __init__(self, guards: Iterable[Guard] = ()):
        self.guards = list(guards)

    def __iter__(self):
        return iter(self.guards)

    def __len__(self) -> int:
        return len(self.guards)

    def __getitem__(self, i: int) -> Guard:
        return self.guards[i]

    def __str__(self) -> str:
        return "\n".join(str(g) for g in self.guards)

    def __repr__(self) -> str:
        return f"GuardSet({len(self.guards)} guards)"


# ---- the builder -------------------------------------------------------------------------


class GuardBuilder:
    """Collect guards on the values in ``f_locals`` / ``f_globals`` and build the check.

    Every method takes a source (e.g. ``"L['x']"``) and an optional ``location`` (the user's
    ``file:line`` that made the guard necessary); the value is read from the frame's
    ``f_locals`` / ``f_globals`` now, unless given as ``value=``. Adding the same guard twice
    keeps one.
    """

    def __init__(self, f_locals: dict, f_globals: dict | None = None):
        self.f_locals = f_locals
        self.f_globals = f_globals if f_globals is not None else {}
        self.guards: list[Guard] = []
        self._keys: set = set()
        self._names = itertools.count()

    def __str__(self) -> str:
        return str(GuardSet(self.guards))

    def __len__(self) -> int:
        return len(self.guards)

    # ---- helpers
    def value(self, source: str):
        """The current value of ``source`` in this builder's frame."""
        tree = parse_source(source)
        code = compile(ast.Expression(tree), "<guard source>", "eval")
        return eval(code, {"L": self.f_locals, "G": self.f_globals})  # noqa: S307

    def _name(self, obj, captures: dict) -> str:
        name = f"___c{next(self._names)}"
        captures[name] = obj
        return name

    def _add(self, kind, source, expr, text, captures=None, location=None, explain=None, key=None):
        if source is not None:
            source = ast.unparse(parse_source(source))
        key = (kind, source, key if key is not None else expr)
        if key in self._keys:
            return self
        self._keys.add(key)
        self.guards.append(Guard(kind, source, expr, text, captures or {}, location, explain))
        return self

    def _val(self, source, value):
        return self.value(source) if value is _UNSET else value

    # ---- guards on values
    def type_match(self, source: str, value=_UNSET, *, location=None):
        """``type(source) is type(value)`` (exact type)."""
        value = self._val(source, value)
        c = {}
        t = self._name(type(value), c)
        return self._add(
            "type",
            source,
            f"type({{v}}) is {t}",
            f"{_norm(source)}: type is {type(value).__qualname__}",
            c,
            location,
            lambda v: f"type is {type(v).__qualname__}",
            key=type(value),
        )

    def id_match(self, source: str, value=_UNSET, *, location=None):
        """``source is value`` (identity; the object is held by the check function)."""
        value = self._val(source, value)
        c = {}
        o = self._name(value, c)
        return self._add(
            "id",
            source,
            f"{{v}} is {o}",
            f"{_norm(source)}: is the object {_short(value)} (id {id(value):#x})",
            c,
            location,
            lambda v: f"is another object: {_short(v)}",
            key=id(value),
        )

    def none_match(self, source: str, *, location=None):
        """``source is None``."""
        return self._add(
            "none",
            source,
            "{v} is None",
            f"{_norm(source)}: is None",
            None,
            location,
            lambda v: f"is {_short(v)}",
        )

    def constant_match(self, source: str, value=_UNSET, *, location=None):
        """``type(source) is type(value) and source == value`` for None, bools, numbers,
        strings, bytes, ranges and tuples/frozensets of those."""
        value = self._val(source, value)
        if value is None:
            return self.none_match(source, location=location)
        if not _is_constant(value):
            raise TypeError(f"constant_match({source}): {type(value).__name__} is not a constant")
        if isinstance(value, float) and value != value:
            raise ValueError(f"constant_match({source}): NaN never equals itself; guard its type")
        c = {}
        t = self._name(type(value), c)
        k = self._name(value, c)
        return self._add(
            "constant",
            source,
            f"type({{v}}) is {t} and {{v}} == {k}",
            f"{_norm(source)} == {value!r}",
            c,
            location,
            lambda v: f"is {_short(v)}",
            key=(type(value), value),
        )

    def len_match(self, source: str, value=_UNSET, *, location=None):
        """Exact type and ``len(source) == len(value)`` (lists, tuples, dicts, ...)."""
        value = self._val(source, value)
        c = {}
        t = self._name(type(value), c)
        n = len(value)
        return self._add(
            "len",
            source,
            f"type({{v}}) is {t} and len({{v}}) == {n}",
            f"{_norm(source)}: {type(value).__qualname__} of length {n}",
            c,
            location,
            lambda v: (
                f"{type(v).__qualname__} of length {len(v) if hasattr(v, '__len__') else '?'}"
            ),
            key=(type(value), n),
        )

    def dict_keys_match(self, source: str, value=_UNSET, *, location=None):
        """Exact type and the same keys in the same order."""
        value = self._val(source, value)
        keys = list(value.keys())
        c = {}
        t = self._name(type(value), c)
        k = self._name(keys, c)
        return self._add(
            "dict_keys",
            source,
            f"type({{v}}) is {t} and list({{v}}.keys()) == {k}",
            f"{_norm(source)}: {type(value).__qualname__} with keys {keys!r}",
            c,
            location,
            lambda v: f"keys are {list(v.keys())!r}" if hasattr(v, "keys") else "has no keys",
            key=(type(value), tuple(map(repr, keys))),
        )

    def hasattr_match(self, source: str, name: str, *, present: bool | None = None, location=None):
        """``hasattr(source, name)`` is as now (or ``present``)."""
        if not name.isidentifier():
            raise ValueError(f"hasattr_match({source}): {name!r} is not an attribute name")
        if present is None:
            present = hasattr(self.value(source), name)
        neg = "" if present else "not "
        return self._add(
            "hasattr",
            source,
            f"{neg}hasattr({{v}}, {name!r})",
            f"{_norm(source)}: {'has' if present else 'has no'} attribute {name!r}",
            None,
            location,
            lambda v: f"{'no' if present else 'an'} attribute {name!r}",
        )

    def module_training(self, source: str, value=_UNSET, *, location=None):
        """``source.training is value.training`` (an nn.Module's train/eval flag)."""
        value = self._val(source, value)
        flag = bool(value.training)
        return self._add(
            "training",
            source,
            f"{{v}}.training is {flag}",
            f"{_norm(source)}.training is {flag}",
            None,
            location,
            lambda v: f"training is {getattr(v, 'training', '?')}",
        )

    def tensor_match(self, source: str, value=_UNSET, *, location=None):
        """Exact tensor type, dtype, device, shape, strides, requires_grad and dispatch keys
        (sparse/quantized/conj/neg/nested/... layouts live there)."""
        torch = _torch()
        value = self._val(source, value)
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"tensor_match({source}): {type(value).__name__} is not a tensor")
        c = {}
        t = self._name(type(value), c)
        dt = self._name(value.dtype, c)
        dev = self._name(value.device, c)
        keys = self._name(torch._C._dispatch_keys(value), c)
        dk = self._name(torch._C._dispatch_keys, c)
        shape = tuple(value.shape)
        stride = tuple(value.stride())
        rg = bool(value.requires_grad)
        expr = (
            f"type({{v}}) is {t} and {{v}}.dtype is {dt} and {{v}}.device == {dev} and "
            f"{{v}}.requires_grad is {rg} and {{v}}.shape == {shape!r} and "
            f"{{v}}.stride() == {stride!r} and {dk}({{v}}) == {keys}"
        )
        text = (
            f"{_norm(source)}: {type(value).__name__} dtype={_dtype(value.dtype)} "
            f"device={value.device} shape={shape} stride={stride} requires_grad={rg}"
        )
        want = dict(
            type=type(value),
            dtype=value.dtype,
            device=value.device,
            requires_grad=rg,
            shape=shape,
            stride=stride,
            keys=torch._C._dispatch_keys(value),
        )
        return self._add(
            "tensor",
            source,
            expr,
            text,
            c,
            location,
            lambda v: _explain_tensor(v, want),
            key=tuple(map(str, want.values())),
        )

    def same_object(self, source_a: str, source_b: str, *, location=None):
        """``source_a is source_b`` (an aliasing relation the compiled code relies on)."""
        return self._relation(source_a, source_b, True, location)

    def distinct_objects(self, source_a: str, source_b: str, *, location=None):
        """``source_a is not source_b``."""
        return self._relation(source_a, source_b, False, location)

    def _relation(self, a, b, same, location):
        ta, tb = ast.unparse(parse_source(a)), ast.unparse(parse_source(b))
        op = "is" if same else "is not"
        self_key = ("relation", None, (ta, tb, same))
        if self_key in self._keys:
            return self
        self._keys.add(self_key)
        guard = Guard(
            "relation",
            None,
            f"{ta} {op} {tb}",
            f"{_norm(ta)} {op} {_norm(tb)}",
            {},
            location,
            None,
        )
        guard.pair = (ta, tb)
        self.guards.append(guard)
        return self

    # ---- guards on global state
    def grad_mode(self, *, location=None):
        """``torch.is_grad_enabled()`` as now."""
        torch = _torch()
        now = torch.is_grad_enabled()
        c = {}
        f = self._name(torch.is_grad_enabled, c)
        return self._add(
            "grad_mode",
            None,
            f"{f}() is {now}",
            f"grad mode enabled is {now}",
            c,
            location,
            lambda v: f"grad mode enabled is {torch.is_grad_enabled()}",
            key=now,
        )

    def autocast_state(self, device_types=("cpu", "cuda"), *, location=None):
        """Autocast enabled flag and dtype per device type, and the autocast cache flag."""
        torch = _torch()
        c = {}
        any_on = getattr(torch._C, "_is_any_autocast_enabled", None)
        if any_on is not None and not any_on():
            # off everywhere: dtypes and the cache flag do not matter, one call checks it all
            f = self._name(any_on, c)
            return self._add(
                "autocast",
                None,
                f"{f}() is False",
                "autocast off on every device",
                c,
                location,
                lambda v: (
                    "autocast is now on for "
                    + ", ".join(d for d in device_types if torch.is_autocast_enabled(d))
                ),
                key="off",
            )
        on = self._name(torch.is_autocast_enabled, c)
        dtype = self._name(torch.get_autocast_dtype, c)
        cache = self._name(torch.is_autocast_cache_enabled, c)
        parts, shown = [], []
        for d in device_types:
            enabled = torch.is_autocast_enabled(d)
            dt = torch.get_autocast_dtype(d)
            dtn = self._name(dt, c)
            parts.append(f"{on}({d!r}) is {enabled} and {dtype}({d!r}) is {dtn}")
            shown.append(f"{d}={'on' if enabled else 'off'}/{_dtype(dt)}")
        cache_on = torch.is_autocast_cache_enabled()
        parts.append(f"{cache}() is {cache_on}")
        state = lambda: " ".join(  # noqa: E731
            f"{d}={'on' if torch.is_autocast_enabled(d) else 'off'}/"
            f"{_dtype(torch.get_autocast_dtype(d))}"
            for d in device_types
        )
        return self._add(
            "autocast",
            None,
            " and ".join(parts),
            f"autocast {' '.join(shown)} cache={cache_on}",
            c,
            location,
            lambda v: f"autocast is now {state()} cache={torch.is_autocast_cache_enabled()}",
            key=(tuple(device_types), tuple(shown), cache_on),
        )

    def deterministic_algorithms(self, *, location=None):
        """``torch.use_deterministic_algorithms`` state (enabled, warn-only)."""
        torch = _torch()
        c = {}
        en = self._name(torch.are_deterministic_algorithms_enabled, c)
        wo = self._name(torch.is_deterministic_algorithms_warn_only_enabled, c)
        now = (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        )
        return self._add(
            "deterministic",
            None,
            f"{en}() is {now[0]} and {wo}() is {now[1]}",
            f"deterministic algorithms enabled={now[0]} warn_only={now[1]}",
            c,
            location,
            lambda v: (
                f"deterministic algorithms enabled={torch.are_deterministic_algorithms_enabled()}"
                f" warn_only={torch.is_deterministic_algorithms_warn_only_enabled()}"
            ),
            key=now,
        )

    def global_state(self, *, location=None):
        """Grad mode, autocast and deterministic-algorithm guards together."""
        self.grad_mode(location=location)
        self.autocast_state(location=location)
        return self.deterministic_algorithms(location=location)

    # ---- the check function
    def build(self) -> CheckFn:
        return build_check_fn(GuardSet(self.guards), self.f_globals)


# A check function: a plain function (fast to call from C) with attributes.
CheckFn = Callable[[dict], bool]


def build_check_fn(guards: GuardSet, f_globals: dict) -> CheckFn:
    """Generate, compile and return ONE function ``check_fn(L) -> bool`` for ``guards``."""
    # The globals dict is captured only when a guard reads G[...]: a check function lives in its
    # code object's extra slot, which the garbage collector cannot see through, so a captured
    # globals dict (which holds the function, which holds the code) is kept until reset().
    env: dict[str, Any] = {}
    body: list[str] = []
    var_of: dict[str, str] = {}

    def var(source: str) -> str:
        """The local variable holding ``source``'s value; assign it (and parents) first."""
        if source in var_of:
            return var_of[source]
        tree = ast.parse(source, mode="eval").body
        if isinstance(tree.value, ast.Name):  # L['x'] / G['x']
            base = "L" if tree.value.id == "L" else "___G"
            if base == "___G":
                env["___G"] = f_globals
            rest = ast.unparse(ast.Subscript(ast.Name(base), tree.slice))
            expr = rest
        else:
            parent = var(ast.unparse(tree.value))
            tree = ast.parse(source, mode="eval").body
            tree.value = ast.Name(parent)
            expr = ast.unparse(tree)
        name = f"___s{len(var_of)}"
        body.append(f"{name} = {expr}")
        var_of[source] = name
        return name

    for guard in guards:
        for name, obj in guard.captures.items():
            env[name] = obj
        if guard.kind == "relation":
            a, b = guard.pair
            op = "is" if " is not " not in guard.expr else "is not"
            cond = f"{var(a)} {op} {var(b)}"
        elif guard.source is None:
            cond = guard.expr
        else:
            cond = guard.expr.format(v=var(guard.source))
        body += [f"if not ({cond}):", "    return False"]

    lines = [f"def ___make({', '.join(env)}):", "    def check_fn(L):", "        try:"]
    lines += [f"            {stmt}" for stmt in body] or ["            pass"]
    # a source that cannot be read (missing key/attribute) means the guard fails
    lines += ["        except Exception:", "            return False", "        return True"]
    lines += ["    return check_fn"]
    src = "\n".join(lines)
    namespace: dict[str, Any] = {}
    exec(compile(src, "<danlu guards>", "exec"), namespace)  # noqa: S102
    check_fn = namespace["___make"](**env)
    check_fn.guards = guards
    check_fn.source = src
    check_fn.failure_reason = lambda f_locals: failure_reason(guards, f_locals, f_globals)
    return check_fn


def failure_reason(guards: GuardSet, f_locals: dict, f_globals: dict) -> str | None:
    """Describe the first guard in ``guards`` that fails for ``f_locals``, or None."""
    scope = {"L": f_locals, "G": f_globals}
    for guard in guards:
        detail = _failure_detail(guard, scope)
        if detail is not None:
            where = f"  # {guard.location}" if guard.location else ""
            return f"{guard.text}; got {detail}{where}"
    return None


def _failure_detail(guard: Guard, scope: dict) -> str | None:
    sources = guard.pair if guard.kind == "relation" else (guard.source,)
    try:
        values = [None if s is None else eval(s, scope) for s in sources]  # noqa: S307
    except Exception as e:
        return f"no value for {', '.join(map(str, sources))} ({type(e).__name__}: {e})"
    if guard.kind == "relation":
        same = values[0] is values[1]
        wanted = " is not " not in guard.expr
        return None if same == wanted else ("the same object" if same else "distinct objects")
    try:
        if guard.check_value(values[0]):
            return None
    except Exception as e:
        return f"an error ({type(e).__name__}: {e})"
    return guard.explain(values[0]) if guard.explain else "a different value"


# ---- printing helpers --------------------------------------------------------------------


def _norm(source: str) -> str:
    return ast.unparse(parse_source(source))


def _short(v) -> str:
    r = repr(v) if _is_constant(v) else f"<{type(v).__qualname__}>"
    return r if len(r) <= 60 else r[:57] + "..."


def _is_constant(v) -> bool:
    if isinstance(v, (tuple, frozenset)):
        return type(v) in (tuple, frozenset) and all(_is_constant(x) for x in v)
    return type(v) in _CONSTANT_TYPES


def _dtype(dt) -> str:
    return str(dt).removeprefix("torch.")


def _explain_tensor(v, want: dict) -> str:
    torch = _torch()
    if not isinstance(v, torch.Tensor):
        return f"not a tensor but {type(v).__qualname__}"
    diffs = []
    if type(v) is not want["type"]:
        diffs.append(f"type {type(v).__name__} (expected {want['type'].__name__})")
    checks = [
        ("dtype", v.dtype, want["dtype"], _dtype),
        ("device", v.device, want["device"], str),
        ("requires_grad", v.requires_grad, want["requires_grad"], str),
        ("shape", tuple(v.shape), want["shape"], str),
        ("stride", tuple(v.stride()), want["stride"], str),
        ("dispatch keys", torch._C._dispatch_keys(v), want["keys"], str),
    ]
    for name, got, exp, fmt in checks:
        if got != exp:
            diffs.append(f"{name} {fmt(got)} (expected {fmt(exp)})")
    return "; ".join(diffs) or "unchanged?"
