"""Where a value came from, as a Python expression over the frame state.

Names in the expressions: ``L`` (locals and live stack slots by name), ``G`` (the function's
globals), ``C`` (the function's closure cells), ``K`` (the frame's own cell objects by name).
Guards and the graph-input fetcher are compiled from these expressions.
"""

from __future__ import annotations

import keyword
import re
import weakref

# expr -> Source, so guard compilation can find a source's parent and share its prefix.
_interned: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class Source:
    __slots__ = ("expr", "parent", "suffix", "prefix", "__weakref__")

    def __init__(self, expr: str, parent: Source | None = None, suffix: str = "", prefix=""):
        self.expr = expr
        # expr == prefix + parent.expr + suffix when parent is set: ``.name`` and ``[key]``
        # reads have no prefix; ``getattr(parent, '__name__')`` and ``type(parent)`` have
        # one, so a guard check reads their parent once too (not once per such source)
        if parent is None and (split := _split(expr)) is not None:
            # written as text (``Source(f"type({x}).forward")``): its parent is found the
            # same way
            prefix, parent_expr, suffix = split
            parent = lookup(parent_expr) or Source(parent_expr)
        self.parent = parent
        self.suffix = suffix
        self.prefix = prefix
        _interned[expr] = self

    def attr(self, name: str) -> Source:
        if name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("__"):
            return Source(f"{self.expr}.{name}", self, f".{name}")
        return Source(f"getattr({self.expr}, {name!r})", self, f", {name!r})", "getattr(")

    def item(self, key) -> Source:
        return Source(f"{self.expr}[{key!r}]", self, f"[{key!r}]")

    def call(self, fn_expr: str) -> Source:
        return Source(f"{fn_expr}({self.expr})", self, ")", f"{fn_expr}(")

    def __repr__(self):
        return self.expr

    def __eq__(self, other):
        return isinstance(other, Source) and other.expr == self.expr

    def __hash__(self):
        return hash(self.expr)


def lookup(expr: str) -> Source | None:
    """The source of ``expr``: the interned one while it lives, else one rebuilt from the
    text when ``expr`` is an attribute or constant-subscript read of a shorter expression
    (so a parent can still be shared after the trace's sources were collected)."""
    src = _interned.get(expr)
    if src is not None:
        return src
    split = _split(expr)
    if split is None:
        return None
    prefix, parent, suffix = split
    return Source(expr, lookup(parent) or Source(parent), suffix, prefix)


_ATTR = re.compile(r"\.([A-Za-z_]\w*)$")
_ITEM = re.compile(r"\[(-?\d+|'[^'\\]*')\]$")
_CELL = re.compile(r"[CK]\[[^\]]*\]")


_GETATTR = re.compile(r"^((?:inspect\.getattr_static|getattr)\()(.*), ('[^'\\]*')\)$", re.S)
_CALL = re.compile(r"^([A-Za-z_][\w.]*)\((.*)\)$", re.S)


def _split(expr: str):
    """``(prefix, parent, suffix)`` for ``parent.name``, ``parent[const]``,
    ``getattr(parent, 'name')``, ``inspect.getattr_static(parent, 'name')`` or ``fn(parent)``, where ``parent`` is a whole expression
    other than a bare name; else None."""
    m = _ATTR.search(expr) or _ITEM.search(expr)
    if m is not None:
        prefix, parent, suffix = "", expr[: m.start()], expr[m.start() :]
    elif (m := _GETATTR.match(expr)) is not None:
        prefix, parent, suffix = m.group(1), m.group(2), f", {m.group(3)})"
    elif (m := _CALL.match(expr)) is not None and not _top_level_comma(m.group(2)):
        prefix, parent, suffix = f"{m.group(1)}(", m.group(2), ")"
    else:
        return None
    if not parent.strip() or parent.isidentifier() or _CELL.fullmatch(parent):
        return None  # a cell's contents are read as one (the frame hook passes them by name)
    if not _balanced(parent):
        return None
    return prefix, parent, suffix


def _code(text: str) -> str | None:
    """``text`` without its string literals (single-quoted, as ``repr`` writes keys), so
    brackets and commas inside a key do not count; None when a literal is left open."""
    out, quoted, i = [], False, 0
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == "'":
                quoted = False
        elif c == "'":
            quoted = True
        else:
            out.append(c)
        i += 1
    return None if quoted else "".join(out)


def _top_level_comma(text: str) -> bool:
    """A comma outside brackets and string literals: ``text`` is several arguments."""
    depth = 0
    for c in _code(text) or "":
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            return True
    return False


def _balanced(text: str) -> bool:
    """Brackets pair up outside string literals."""
    code = _code(text)
    if code is None:
        return False
    closing = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    for c in code:
        if c in "([{":
            stack.append(c)
        elif c in closing and (not stack or stack.pop() != closing[c]):
            return False
    return not stack


def local_source(name: str) -> Source:
    return Source(f"L[{name!r}]")


def global_source(name: str) -> Source:
    return Source(f"G[{name!r}]")


def closure_source(index: int) -> Source:
    return Source(f"C[{index}].cell_contents")


def cell_source(name: str) -> Source:
    return Source(f"K[{name!r}].cell_contents")


def fast_suffix(parent_value, suffix: str) -> str:
    """``suffix`` (``.name``) read the quick way when ``parent_value`` is an ``nn.Module``
    whose ``name`` lives in ``_parameters``/``_buffers``/``_modules``: a dict lookup instead of
    ``Module.__getattr__`` (a Python call). Same value as long as nothing on the instance or
    its class shadows the name, which is what makes ``__getattr__`` run in the first place."""
    if not _is_module(parent_value):
        return suffix
    if suffix.startswith("[") and _is_plain_module_list(parent_value):
        # ModuleList keeps its keys "0", "1", ... in order (it renumbers on insert/delete);
        # a Sequential built from positional modules has the same keys. Should the keys
        # change, the key read fails or finds the object its id guard expects.
        try:
            index = int(suffix[1:-1])
        except ValueError:
            return suffix
        if 0 <= index and str(index) in parent_value._modules:
            return f"._modules[{str(index)!r}]"
        return suffix
    if not suffix.startswith("."):
        return suffix
    name = suffix[1:]
    d = parent_value.__dict__
    if name in d or any(name in k.__dict__ for k in type(parent_value).__mro__):
        return suffix
    for store in ("_parameters", "_buffers", "_modules"):
        if name in d.get(store, ()):
            return f".{store}[{name!r}]"
    return suffix


def _is_plain_module_list(value) -> bool:
    import torch

    if isinstance(value, torch.nn.ModuleList):
        return type(value).__getitem__ is torch.nn.ModuleList.__getitem__
    if isinstance(value, torch.nn.Sequential):
        return type(value).__getitem__ is torch.nn.Sequential.__getitem__ and all(
            k == str(i) for i, k in enumerate(value._modules)
        )
    return False


def _is_module(value) -> bool:
    import torch

    return isinstance(value, torch.nn.Module)


class FrameValues:
    """Trace-time values of source expressions over a frame's ``f_locals`` and globals
    (None when an expression cannot be evaluated there, e.g. it reads a cell object)."""

    def __init__(self, f_locals, f_globals, freevars=()):
        from .output_graph import _SOURCE_ENV

        self.env = {**_SOURCE_ENV, "L": f_locals, "G": f_globals}
        self.freevars = tuple(freevars)
        self.cache: dict = {}

    def __call__(self, expr: str):
        if expr not in self.cache:
            try:
                # f_locals holds the frame's cells' contents by name (the module that
                # ``danlu.compile(model)`` closes over is ``C[0].cell_contents``)
                self.cache[expr] = eval(cells_as_locals(expr, self.freevars), self.env)
            except Exception:
                self.cache[expr] = None
        return self.cache[expr]

    def render(self, expr: str, root) -> str:
        """``expr`` with module attribute reads made quick; ``root(expr)`` renders sources
        that have no parent."""
        src = lookup(expr)
        if src is None or src.parent is None:
            return root(expr)
        parent = src.parent.expr
        if src.prefix:
            return src.prefix + self.render(parent, root) + src.suffix
        return self.render(parent, root) + fast_suffix(self(parent), src.suffix)


def cells_as_locals(text: str, freevars) -> str:
    """``text`` with cell reads as the frame's local names: ``C[i].cell_contents`` becomes
    ``L[freevars[i]]`` and ``K[name].cell_contents`` ``L[name]`` (a frame's locals hold its
    cells' contents by name). A closure index past ``freevars`` is left as it is."""
    text = re.sub(
        r"\bC\[(\d+)\]\.cell_contents",
        lambda m: f"L[{freevars[int(m[1])]!r}]" if int(m[1]) < len(freevars) else m[0],
        text,
    )
    return re.sub(r"\bK\[('[^'\\]*')\]\.cell_contents", r"L[\1]", text)
