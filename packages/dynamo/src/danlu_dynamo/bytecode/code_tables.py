"""The tables an oparg indexes: constants, names, and the "fast locals plus" slots.

Since 3.11, locals, cells and free variables share one frame array (`localsplus`): the
arguments and other locals (`co_varnames`) first, then cells that are not also arguments,
then free variables. Local and cell/free opargs index that array.
"""

from __future__ import annotations

import dataclasses
from types import CodeType
from typing import Any

# Constants found again by equality (not only identity) when they are of these types;
# floats and containers are matched by identity only (-0.0 == 0.0, nan != nan, 1 == 1.0).
_EQUAL_BY_VALUE = (str, bytes, int, type(None), type(Ellipsis))


@dataclasses.dataclass
class CodeTables:
    consts: list[Any]
    names: list[str]
    varnames: list[str]
    cellvars: list[str]
    freevars: list[str]

    @classmethod
    def from_code(cls, code: CodeType) -> CodeTables:
        return cls(
            list(code.co_consts),
            list(code.co_names),
            list(code.co_varnames),
            list(code.co_cellvars),
            list(code.co_freevars),
        )

    def copy(self) -> CodeTables:
        return CodeTables(
            list(self.consts),
            list(self.names),
            list(self.varnames),
            list(self.cellvars),
            list(self.freevars),
        )

    # -- constants ---------------------------------------------------------------------------
    def const_index(self, value: Any, hint: int | None = None) -> int:
        """Index of `value` in co_consts, appending it if absent."""
        consts = self.consts
        if hint is not None and 0 <= hint < len(consts) and consts[hint] is value:
            return hint
        for fresh in (False, True):
            by_id, by_value = self._const_lookup(rebuild=fresh)
            i = by_id.get(id(value))
            if i is not None and i < len(consts) and consts[i] is value:
                return i
            if type(value) in _EQUAL_BY_VALUE:
                i = by_value.get((type(value), value))
                if i is not None and i < len(consts):
                    c = consts[i]
                    if type(c) is type(value) and c == value:
                        return i
        consts.append(value)
        by_id.setdefault(id(value), len(consts) - 1)
        if type(value) in _EQUAL_BY_VALUE:
            by_value.setdefault((type(value), value), len(consts) - 1)
        self.__dict__["_const_cache"] = (len(consts), id(consts), by_id, by_value)
        return len(consts) - 1

    def _const_lookup(
        self, *, rebuild: bool = False
    ) -> tuple[dict[int, int], dict[tuple[type, Any], int]]:
        """Lookup dicts over co_consts, rebuilt when the list changed (entries are re-checked
        by the caller, so an in-place edit of the list can only cost a rebuild)."""
        consts = self.consts
        cached = self.__dict__.get("_const_cache")
        if rebuild or cached is None or cached[0] != len(consts) or cached[1] != id(consts):
            by_id: dict[int, int] = {}
            by_value: dict[tuple[type, Any], int] = {}
            for i, c in enumerate(consts):
                by_id.setdefault(id(c), i)
                if type(c) in _EQUAL_BY_VALUE:
                    by_value.setdefault((type(c), c), i)
            cached = (len(consts), id(consts), by_id, by_value)
            self.__dict__["_const_cache"] = cached
        return cached[2], cached[3]

    # -- names -------------------------------------------------------------------------------
    def name_index(self, name: str, hint: int | None = None) -> int:
        names = self.names
        if hint is not None and 0 <= hint < len(names) and names[hint] == name:
            return hint
        cached = self.__dict__.get("_name_cache")
        if cached is None or cached[0] != len(names) or cached[1] != id(names):
            lookup: dict[str, int] = {}
            for i, n in enumerate(names):
                lookup.setdefault(n, i)
            cached = (len(names), id(names), lookup)
        lookup = cached[2]
        i = lookup.get(name)
        if i is not None and not (i < len(names) and names[i] == name):
            lookup = {}
            for k, n in enumerate(names):
                lookup.setdefault(n, k)
            i = lookup.get(name)
        if i is None:
            names.append(name)
            i = lookup[name] = len(names) - 1
        self.__dict__["_name_cache"] = (len(names), id(names), lookup)
        return i

    # -- locals, cells, free variables -------------------------------------------------------
    def localsplus(self) -> list[str]:
        varnames = set(self.varnames)
        return (
            list(self.varnames)
            + [c for c in self.cellvars if c not in varnames]
            + list(self.freevars)
        )

    def _slot_tables(self, *, rebuild: bool = False) -> tuple[list[str], dict, dict]:
        """(localsplus names, first slot per name, last slot per name), cached."""
        key = (
            len(self.varnames),
            len(self.cellvars),
            len(self.freevars),
            id(self.varnames),
            id(self.cellvars),
            id(self.freevars),
        )
        cached = self.__dict__.get("_slot_cache")
        if rebuild or cached is None or cached[0] != key:
            names = self.localsplus()
            first: dict[str, int] = {}
            last: dict[str, int] = {}
            for i, name in enumerate(names):
                first.setdefault(name, i)
                last[name] = i
            cached = (key, names, first, last)
            self.__dict__["_slot_cache"] = cached
        return cached[1], cached[2], cached[3]

    def local_index(
        self, name: str, *, create: bool = True, hint: int | None = None, deref: bool = False
    ) -> int:
        """Slot of `name`; a new plain local is added to co_varnames if `create`.

        A name can own two slots (a local or cell that is also a free variable: class bodies
        with `__class__`, type-parameter scopes); `hint` (the slot used before) keeps the
        choice, otherwise cell/free-variable instructions (`deref`) take the later slot."""
        for fresh in (False, True):
            names, first, last = self._slot_tables(rebuild=fresh)
            if hint is not None and 0 <= hint < len(names) and names[hint] == name:
                slot = hint
            else:
                slot = (last if deref else first).get(name)
            if slot is not None and self._name_at(slot) == name:
                return slot
        if not create:
            raise KeyError(f"no local, cell or free variable named {name!r}")
        if name in self.cellvars or name in self.freevars:
            raise ValueError(f"{name!r} is a cell/free variable name")
        self.varnames.append(name)
        return self._slot_tables()[1][name]

    def _name_at(self, slot: int) -> str | None:
        """The name in `slot` according to the current lists (guards against stale caches
        after in-place edits)."""
        if slot < len(self.varnames):
            return self.varnames[slot]
        names = self.localsplus()
        return names[slot] if slot < len(names) else None

    def add_local(self, name: str) -> int:
        return self.local_index(name, create=True)

    def code_replace_args(self) -> dict[str, Any]:
        return {
            "co_consts": tuple(self.consts),
            "co_names": tuple(self.names),
            "co_varnames": tuple(self.varnames),
            "co_cellvars": tuple(self.cellvars),
            "co_freevars": tuple(self.freevars),
            "co_nlocals": len(self.varnames),
        }
