"""Guards: the conditions under which a captured frame may be reused, and their compilation
into one check function per cache entry. This is danlu_dynamo's only guard system.

Capture (``output_graph.py``, ``builder.py``, ``variables/``) records each assumption on a
:class:`GuardSet` as a Python boolean expression over the frame state (``L``, ``G``, ``C``,
``K``: see ``source.py``). The check reads each source once (a parent's value is reused by its
children), tests the guards in order and returns False at the first failing one, so the hit
path is a single Python call with no interpretation of guard objects. Two forms:
``compile_for_frame`` gives ``check(L)`` for the C frame hook's cache (``GuardedCode``),
``compile`` gives ``check(L, G, C, K)`` for the segment path's own cache. Both carry
``.failure_reason`` (the failing guard's text, for the recompile logs), ``.source`` and
``.guards`` (printable, one line per guard).
"""

from __future__ import annotations

import dataclasses
import re

import torch

from . import module_hooks
from .guard_trees import module_trees
from .source import cells_as_locals, fast_suffix, lookup


@dataclasses.dataclass(frozen=True)
class Guard:
    kind: str  # TYPE_MATCH, ID_MATCH, CONSTANT_MATCH, TENSOR_MATCH, LEN, KEYS, GLOBAL_STATE, ...
    source: str
    expr: str  # the Python expression that must be true
    others: tuple = ()  # further sources the expression reads (aliasing guards)
    desc: str = ""  # readable form, when the expression is not (shape guards)
    # a presence test ``hasattr(S, 'a')``: the source ``S.a`` whose read implies it
    implied_by: str = ""
    # what a module tree may settle the guard with (``guard_trees``), in a 1-tuple (None: no
    # tree): CONSTANT_MATCH's immutable value, ID_MATCH's object, TENSOR_MATCH's test arguments
    value: object = dataclasses.field(default=None, compare=False, repr=False)

    def __str__(self):
        return f"{self.kind:<14} {self.desc or self.expr}"


def _tensor_spec(t: torch.Tensor):
    return (
        type(t),
        t.dtype,
        t.device,
        tuple(t.shape),
        tuple(t.stride()),
        bool(t.requires_grad),
        t.is_leaf,
    )


def _types(values) -> tuple:
    """The types of a container's items, nested containers' item types included."""
    return tuple(
        (type(v), _types(v)) if isinstance(v, (tuple, frozenset)) else type(v) for v in values
    )


def _flat(values) -> bool:
    return not any(isinstance(v, (tuple, frozenset)) for v in values)


_ATOMS = (int, float, complex, str, bytes, bool, type(None))


def _immutable(value) -> bool:
    """Built only of immutable atoms: the same object later still has the same contents."""
    if isinstance(value, (tuple, frozenset)):
        return all(_immutable(v) for v in value)
    return type(value) in _ATOMS


def _bind_guard_checks():
    """The C guard tests (``_guard_checks``), bound to torch's tensor type; None where the
    extension is missing or torch's tensor attributes are not the getters it calls."""
    try:
        from .. import _guard_checks

        _guard_checks.bind(torch._C.TensorBase)
    except (ImportError, AttributeError, TypeError):
        return None
    return _guard_checks


_c_checks = _bind_guard_checks()


def _bind_tensor_checks():
    """The C++ tensor test (``_tensor_checks``, reads the tensor's fields), falling back to the
    getter-based one; None where it was not built, or was built against another torch."""
    if _c_checks is None:
        return None
    try:
        from .. import _tensor_checks
    except ImportError:
        return None
    if _tensor_checks.TORCH_VERSION != torch.__version__:
        return None
    _tensor_checks.bind(_c_checks.tensor_match)
    _c_checks.use_tensor_test(_tensor_checks.TENSOR_TEST)  # module trees read fields too
    return _tensor_checks


_direct_checks = _bind_tensor_checks()
# what the C tensor test reads: a type may use it only where each is torch's own
_TENSOR_TEST_ATTRS = (
    "dtype",
    "requires_grad",
    "shape",
    "stride",
    "is_cpu",
    "device",
    "is_neg",
    "is_conj",
)
_c_tensor_types: dict = {}


def _c_tensor_test(cls) -> bool:
    """May ``cls``'s metadata guard be the C call? Only where every attribute it reads is
    torch's own (a subclass may override ``shape`` or ``device``; the C call would not see
    that)."""
    hit = _c_tensor_types.get(cls)
    if hit is None:
        base = torch._C.TensorBase.__dict__

        def owner(name):
            return next((k.__dict__[name] for k in cls.__mro__ if name in k.__dict__), None)

        hit = _c_checks is not None and all(owner(n) is base.get(n) for n in _TENSOR_TEST_ATTRS)
        _c_tensor_types[cls] = hit
    return hit


_DEFAULT_TORCH_FUNCTIONS = (
    torch.Tensor.__torch_function__.__func__,
    torch._C._disabled_torch_function_impl,
)


def _direct_tensor_test(cls) -> bool:
    """May the C++ test read ``cls``'s fields directly? Where the getters would run no
    ``__torch_function__`` of the type's own (they call it; the fields do not)."""
    if _direct_checks is None or not _c_tensor_test(cls):
        return False
    tf = getattr(cls, "__torch_function__", None)
    return getattr(tf, "__func__", tf) in _DEFAULT_TORCH_FUNCTIONS


def _tensor_match(x, spec) -> bool:
    cls, dtype, device, shape, stride, rg, _leaf = spec
    return (
        type(x) is cls
        and x.dtype is dtype
        and x.device == device
        and x.shape == shape
        and x.stride() == stride
        and x.requires_grad is rg
    )


class GuardSet:
    """Collects guards (deduplicated) and the constants their expressions refer to."""

    def __init__(self):
        self.guards: list[Guard] = []
        self._seen: set[str] = set()
        self.env: dict[str, object] = {
            "__name__": "danlu_dynamo.generated",
            "___tensor_match": _tensor_match,
            "___types": _types,
            "___tensor_ok": _c_checks.tensor_match if _c_checks else None,
            "___tensor_read": _direct_checks.tensor_match if _direct_checks else None,
            "___plain_module": _c_checks.plain if _c_checks else module_hooks.plain,
            "___hookless_module": _c_checks.hookless if _c_checks else module_hooks.hookless,
            "___no_global_hooks": module_hooks.no_global_hooks,
            "torch": torch,
            "inspect": __import__("inspect"),
            "sys": __import__("sys"),
            "math": __import__("math"),
        }
        self._const_names: dict[int, str] = {}
        # Dynamic shapes: the trace's ShapeEnv; its guards are read when the check compiles
        # (after the trace), see ``all_guards``.
        self.shape_env = None

    def types_expr(self, source: str, values) -> str:
        """``source``'s items have the types ``values``' items have (nested containers' item
        types too). Flat containers (almost all) are checked by ``map(type, ...)``, which
        runs in C: a third of the cost of ``___types``, and guards run on every call."""
        values = list(values)
        if _flat(values):
            return f"tuple(map(type, {source})) == {self._const(tuple(type(v) for v in values))}"
        return f"___types({source}) == {self._const(_types(values))}"

    def _const(self, value) -> str:
        # One name per object (``env`` keeps it alive, so its id stays its own): the same
        # guard added twice then has the same text, and ``add`` keeps it once.
        name = self._const_names.get(id(value))
        if name is None:
            name = f"___c{len(self.env)}"
            self.env[name] = value
            self._const_names[id(value)] = name
        return name

    def add(
        self,
        kind: str,
        source: str,
        expr: str,
        others: tuple = (),
        implied_by: str = "",
        desc: str = "",
        value=None,
    ):
        if expr in self._seen:
            return
        self._seen.add(expr)
        self.guards.append(
            Guard(kind, source, expr, others, desc=desc, implied_by=implied_by, value=value)
        )

    def type_match(self, source: str, value):
        self.add("TYPE_MATCH", source, f"type({source}) is {self._const(type(value))}")

    def id_match(self, source: str, value):
        self.add("ID_MATCH", source, f"{source} is {self._const(value)}", value=(value,))

    def constant_match(self, source: str, value):
        if value is None or value is True or value is False or value is Ellipsis:
            self.add("CONSTANT_MATCH", source, f"{source} is {value!r}", value=(value,))
            return
        t = self._const(type(value))
        if isinstance(value, float) and value != value:  # nan
            self.add("CONSTANT_MATCH", source, f"type({source}) is {t} and {source} != {source}")
            return
        c = self._const(value)
        expr = f"type({source}) is {t} and {source} == {c}"
        if isinstance(value, (tuple, frozenset)):
            # 1 == 1.0 == True: equal containers may hold other types, which programs see
            expr += f" and {self.types_expr(source, value)}"
            if _immutable(value):
                # a module's stride or padding tuple is the very object seen at capture on
                # every later call: identity settles it without comparing items and types
                expr = f"{source} is {c} or ({expr})"
        # the object itself (in a 1-tuple: None is "no value"), when identity implies the test
        self.add(
            "CONSTANT_MATCH",
            source,
            expr,
            value=(value,) if _immutable(value) and value == value else None,
        )

    def tensor_match(self, source: str, t: torch.Tensor, dynamic: bool = False):
        cls, dtype, device, shape, stride, rg, _leaf = _tensor_spec(t)
        v = source
        # a negative (or, for complex dtypes, conjugate) view has its sign or conjugation
        # pending in a dispatch key, not in the storage: the graph traced for a plain tensor
        # would read the unresolved storage
        lazy = f" and {v}.is_neg() is {t.is_neg()}"
        if dtype.is_complex:
            lazy += f" and {v}.is_conj() is {t.is_conj()}"
        if dynamic:  # sizes and strides: the ShapeEnv's guards (``dynamic.shape_guards``)
            self.add(
                "TENSOR_MATCH",
                source,
                f"type({v}) is {self._const(cls)} and {v}.dtype is {self._const(dtype)} and "
                f"{v}.requires_grad is {rg} and {v}.dim() == {len(shape)} and "
                + (
                    f"{v}.is_cpu"
                    if device.type == "cpu"
                    else f"{v}.device == {self._const(device)}"
                )
                + lazy,
            )
            return
        readable = (
            f"type({v}) is {self._const(cls)} and {v}.dtype is {self._const(dtype)} and "
            f"{v}.requires_grad is {rg} and {v}.shape == {shape!r} and "
            f"{v}.stride() == {stride!r} and "
            + (f"{v}.is_cpu" if device.type == "cpu" else f"{v}.device == {self._const(device)}")
            + lazy
        )
        if not _c_tensor_test(cls):
            self.add("TENSOR_MATCH", source, readable)
            return
        # the same test as one C call (_guard_checks.tensor_match, or _tensor_checks' reading
        # the fields), printed as the expression
        dev = "None" if device.type == "cpu" else self._const(device)
        conj = repr(t.is_conj()) if dtype.is_complex else "None"
        test = "___tensor_read" if _direct_tensor_test(cls) else "___tensor_ok"
        expr = (
            f"{test}({v}, {self._const(cls)}, {self._const(dtype)}, {rg}, {shape!r}, "
            f"{stride!r}, {dev}, {t.is_neg()}, {conj})"
        )
        # the test's arguments after the tensor, for a module tree's C call (``guard_trees``)
        spec = (cls, dtype, rg, shape, stride, None if dev == "None" else device, t.is_neg())
        spec += (t.is_conj() if dtype.is_complex else None,)
        self.add("TENSOR_MATCH", source, expr, desc=readable, value=(spec,))

    def storage_offset(self, source: str, t: torch.Tensor):
        """The program read a storage offset: TENSOR_MATCH does not hold it."""
        self.add("STORAGE_OFFSET", source, f"{source}.storage_offset() == {t.storage_offset()}")

    def no_module_hooks(self, source: str, own_forward: bool):
        """A module whose call was inlined without hooks: a hook registered later (on it, or
        on every module), or a ``forward`` assigned on the instance, must not be skipped.
        One check per module (modules are many; guards run on every call)."""
        check = "___plain_module" if not own_forward else "___hookless_module"
        self.add("NO_HOOKS", source, f"{check}({source}.__dict__)")
        self.add("NO_HOOKS", "", "___no_global_hooks()")

    def length(self, source: str, value):
        self.type_match(source, value)
        self.add("LEN", source, f"len({source}) == {len(value)}")

    def dict_keys(self, source: str, value):
        self.type_match(source, value)
        keys = list(value.keys())
        self.add(
            "DICT_KEYS",
            source,
            f"list({source}.keys()) == {self._const(keys)} and "
            f"{self.types_expr(f'{source}.keys()', keys)}",
        )

    def is_same(self, source: str, other: str):
        self.add("ALIAS", source, f"{source} is {other}", (other,))

    def hasattr_guard(self, source: str, name: str, present: bool):
        neg = "" if present else "not "
        # a presence test is implied by a read of the attribute (``_implied_hasattr``); the
        # child is written as ``Source.attr`` writes plain attribute reads
        child = f"{source}.{name}" if present and name.isidentifier() else ""
        self.add("HASATTR", source, f"{neg}hasattr({source}, {name!r})", implied_by=child)

    def global_state(self):
        self.add("GLOBAL_STATE", "", f"torch.is_grad_enabled() is {torch.is_grad_enabled()!r}")
        self.add(
            "GLOBAL_STATE",
            "",
            f"torch.get_default_dtype() is {self._const(torch.get_default_dtype())}",
        )
        self.add("GLOBAL_STATE", "", self._autocast_state())
        # a TorchFunctionMode entered around the call changes what torch functions do
        n = torch._C._len_torch_function_stack()
        self.add("GLOBAL_STATE", "", f"torch._C._len_torch_function_stack() == {n}")

    def _autocast_state(self) -> str:
        """Autocast on/off and, where on, its dtype for the CPU and CUDA: the trace recorded
        the casts autocast made (one cheap call when it is off everywhere)."""
        if not torch._C._is_any_autocast_enabled():
            return "torch._C._is_any_autocast_enabled() is False"
        parts = []
        for device in ("cpu", "cuda"):
            on = torch.is_autocast_enabled(device)
            parts.append(f"torch.is_autocast_enabled({device!r}) is {on}")
            if on:
                dtype = self._const(torch.get_autocast_dtype(device))
                parts.append(f"torch.get_autocast_dtype({device!r}) is {dtype}")
        return " and ".join(parts)

    def compile(self):
        """The segment path's check: ``check(L, G, C, K)`` over the stepper's frame state."""
        return _check_function("L, G, C, K", self._lines(), dict(self.env), str(self))

    def compile_for_frame(self, f_globals, freevars, first_check=None, values=None):
        """The check function of a frame-hook cache entry: ``check(L)`` where ``L`` is the
        dict the C hook passes (arguments by name, free variables' contents by name).

        Globals come from ``f_globals`` (one code object runs with one module's globals);
        ``C[i].cell_contents`` reads become ``L[freevars[i]]`` and ``K[name].cell_contents``
        ``L[name]`` (at a frame's entry an argument that is a cell arrives as its value; a
        resume function receives the original's cells as free variables). ``values``
        (``source.FrameValues``) lets module attribute reads go straight to the module's dicts. ``first_check`` (a callable of
        no arguments, e.g. "is this entry's capture context the active one") is tested first.
        A source the C hook cannot provide (the frame's own cells) raises ``ValueError``.
        """

        def to_frame(text):
            text = cells_as_locals(text, freevars)
            if re.search(r"(?<![\w.'])[CK]\[", text):
                raise ValueError(f"guard reads a cell object the frame hook cannot pass: {text}")
            return text

        def framed(lines):
            return [to_frame(x) if isinstance(x, str) else (to_frame(x[0]), x[1]) for x in lines]

        env = dict(self.env)
        env["G"] = f_globals
        env["___first"] = first_check
        full = _check_function(
            "L", framed(self._lines(values)), env, str(self), first=first_check is not None
        )
        if values is None or _c_checks is None:
            return full
        tensor_test = "___tensor_read" if _direct_checks is not None else "___tensor_ok"
        roots, settled = module_trees(self.all_guards(), values, tensor_test)
        if not roots:
            return full
        # the quick check: each module tree's guards as one C call; where one says no (or
        # anything raises) the full check answers
        env = dict(env)
        env["___full"] = full
        env["___module_tree"] = _c_checks.module_tree
        quick = _check_function(
            "L",
            framed(self._lines(values, (roots, settled), env)),
            env,
            str(self),
            first=first_check is not None,
            fallback="___full(L)",
        )
        quick.failure_reason = full.failure_reason
        quick.full = full
        return quick

    def _lines(self, values=None, trees=None, env=None):
        """The check's lines: reads into ``___v<i>`` variables, each guard's ``if``. With
        ``trees`` (``guard_trees.module_trees``' roots and settled guards), the guards a tree
        settles become one ``module_tree`` line where its first one was (its spec added to
        ``env``)."""
        lines = []
        var_of: dict[str, str] = {}

        def var(expr: str) -> str:
            hit = var_of.get(expr)
            if hit is not None:
                return hit
            src = lookup(expr)
            if src is not None and src.parent is not None:
                suffix = src.suffix
                if values is not None and not src.prefix:
                    suffix = fast_suffix(values(src.parent.expr), suffix)
                code = src.prefix + var(src.parent.expr) + suffix
            else:
                code = expr
            name = f"___v{len(var_of)}"
            lines.append(f"{name} = {code}")
            var_of[expr] = name
            return name

        roots, settled = trees or ({}, {})
        emitted = set()
        guards = self.all_guards()
        read = {s for g in guards for s in (g.source, *g.others) if s}
        for g in guards:
            if _implied_hasattr(g, read):
                continue
            root = settled.get(id(g))
            if root is not None:
                if root not in emitted:
                    emitted.add(root)
                    spec = f"___b{len(env)}"
                    env[spec] = roots[root].spec()
                    n = len(roots[root].all_guards())
                    # a tree that says no leaves the answer to the full check
                    lines.append(
                        (
                            f"if not ___module_tree({var(root)}, {spec}): return ___full(L)",
                            f"{n} guards of the module tree at {root}",
                        )
                    )
                continue
            cond = g.expr
            for s in sorted((g.source, *g.others), key=len, reverse=True):
                if s:
                    cond = cond.replace(s, var(s))
            lines.append((f"if not ({cond}): return False", str(g).strip()))
        return lines

    def all_guards(self) -> list[Guard]:
        """The guards, then the ShapeEnv's (as they stand now) for dynamic inputs."""
        if self.shape_env is None:
            return self.guards
        from .dynamic import shape_guards

        extra = [
            Guard("SHAPE", src, expr, others, desc)
            for src, expr, others, desc in shape_guards(self.shape_env)
        ]
        return self.guards + extra

    def __str__(self):
        return "\n".join(str(g) for g in self.all_guards())


def _implied_hasattr(guard: Guard, read: set) -> bool:
    """``hasattr(S, 'a')`` when another guard reads ``S.a`` (or below it): that read raises
    AttributeError where the attribute is missing, and the check returns False on it.
    Attribute reads of transformers' configs cost ~1 us each (a Python ``__getattribute__``),
    and their presence tests were a tenth of a LLaMA check."""
    child = guard.implied_by
    return bool(child) and any(s == child or s.startswith((child + ".", child + "[")) for s in read)


def _check_function(
    params: str, lines: list, env: dict, printable: str, first: bool = False, fallback=None
):
    """Compile ``___check(params)``, False at the first failing line, and beside it
    ``___why(params)``: the same lines returning the failing guard's text (None if all pass).
    ``lines``: ``_lines()`` output, with ``first``: test ``___first()`` (in ``env``) before all.
    ``fallback``: an expression the check returns instead of False where a read raises."""
    described = [(x, None) if isinstance(x, str) else x for x in lines]
    checks = [x for x, _ in described]
    why = [x.replace("return False", f"return {d!r}") if d else x for x, d in described]
    if first:
        checks.insert(0, "if not ___first(): return False")
        why.insert(0, "if not ___first(): return 'another capture context (optimize call)'")
    src = (
        f"def ___check({params}):\n    try:\n        "
        + ("\n        ".join(checks) or "pass")
        + f"\n    except Exception:\n        return {fallback or 'False'}\n    return True\n"
    )
    src_why = (
        f"def ___why({params}):\n    try:\n        "
        + ("\n        ".join(why) or "pass")
        + "\n    except Exception as e:\n        return f'a guarded value cannot be read: "
        "{type(e).__name__}: {e}'\n    return None\n"
    )
    exec(compile(src + src_why, "<danlu_dynamo guards>", "exec"), env)
    fn = env["___check"]
    fn.failure_reason = env["___why"]
    fn.source = src
    fn.guards = printable
    return fn
