"""Run in a fresh interpreter: swap the code of stdlib functions for assembled code, compare.

Usage: python bytecode_stdlib_workload.py {round_trip|edited}
Prints one JSON line: how many functions were swapped and which workload results changed.
"""

from __future__ import annotations

import argparse
import ast
import collections
import dataclasses
import difflib
import enum
import fractions
import functools
import heapq
import importlib
import inspect
import io
import json
import json.decoder
import json.encoder
import json.scanner
import pprint
import re
import shlex
import statistics
import string
import sys
import textwrap
import tokenize
import types

from bytecode_edit_helpers import pad_with_nops, shuffle_blocks, transform_code

from danlu_dynamo.bytecode import assemble, disassemble

MODULES = [
    "json", "json.encoder", "json.decoder", "json.scanner", "textwrap", "difflib",
    "statistics", "fractions", "argparse", "pprint", "shlex", "string", "heapq", "collections",
    "enum", "dataclasses", "ast", "tokenize", "inspect", "functools", "re", "re._parser",
    "re._compiler", "re._casefix", "typing", "copy", "contextlib",
]  # fmt: skip


def workload() -> dict[str, str]:
    r = {}
    data = {"b": [1, 2.5, None, True, {"x": "y\u00e9\n"}], "a": {"n": list(range(5))}}
    r["json.dumps"] = json.dumps(data, indent=2, sort_keys=True)
    r["json.loads"] = repr(json.loads(r["json.dumps"]))
    dec = json.decoder.JSONDecoder()
    r["py_scanner"] = repr(json.scanner.py_make_scanner(dec)('{"k": [1, 2, "s"]}', 0))
    r["py_scanstring"] = repr(json.decoder.py_scanstring('ab\\u00e9c"', 0))
    text = "The quick brown fox jumps over the lazy dog. " * 6
    r["textwrap"] = repr(
        (textwrap.fill(text, 30), textwrap.shorten(text, 40), textwrap.dedent("  a\n    b\n"))
    )
    a, b = text.split(), (text.replace("fox", "cat").replace("lazy", "busy")).split()
    r["unified_diff"] = "".join(difflib.unified_diff(a, b, lineterm="\n"))
    r["ndiff"] = "".join(difflib.ndiff(["one\n", "two\n"], ["one\n", "tw0\n", "three\n"]))
    r["matcher"] = repr(
        (
            difflib.SequenceMatcher(None, a, b).ratio(),
            difflib.get_close_matches("appel", ["ape", "apple", "peach"]),
        )
    )
    difflib.HtmlDiff._default_prefix = 0  # a class-level counter feeds the anchor names
    r["htmldiff"] = difflib.HtmlDiff().make_table(a[:5], b[:5])
    xs = [2.5, 3.25, 1.0, 7.5, 4.0, 4.0, 9.75]
    ys = [1.0, 2.0, 3.5, 4.0, 4.5, 6.0, 8.0]
    r["statistics"] = repr(
        (
            statistics.mean(xs), statistics.median(xs), statistics.stdev(xs),
            statistics.variance(xs), statistics.quantiles(xs, n=4), statistics.mode([1, 2, 2]),
            statistics.correlation(xs, ys), statistics.linear_regression(xs, ys),
            statistics.NormalDist(1, 2).cdf(0.5), statistics.fmean(xs), statistics.harmonic_mean(xs),
        )
    )  # fmt: skip
    f = fractions.Fraction(3, 7)
    r["fractions"] = repr(
        (f + fractions.Fraction("2/5"), f**3, fractions.Fraction(3.14159).limit_denominator(100), f < 0.5, round(f, 3))
    )  # fmt: skip
    parser = argparse.ArgumentParser(prog="tool", description="demo")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="cmd")
    run = sub.add_parser("run")
    run.add_argument("target", nargs="+")
    r["argparse"] = repr(vars(parser.parse_args(["--count", "3", "-v", "run", "a", "b"])))
    r["argparse_help"] = parser.format_help()
    try:
        parser.parse_args(["--count", "x"])
    except SystemExit as e:
        r["argparse_error"] = repr(e.code)
    r["pprint"] = pprint.pformat({f"k{i}": list(range(i)) for i in range(12)}, width=40)
    r["shlex"] = repr(
        (shlex.split("a 'b c' \"d e\" f\\ g"), shlex.quote("it's"), shlex.join(["x y", "z"]))
    )
    r["string"] = repr(
        (string.Template("$who likes ${what}").substitute(who="tim", what="pie"), string.Formatter().format("{0:>5}|{x!r}", 42, x="s"), string.capwords("hello  world"))
    )  # fmt: skip
    r["heapq"] = repr(
        (
            heapq.nlargest(3, xs),
            heapq.nsmallest(2, xs, key=lambda v: -v),
            list(heapq.merge([1, 4], [2, 3])),
        )
    )
    Point = collections.namedtuple("Point", "x y")
    od = collections.OrderedDict(a=1, b=2)
    od.move_to_end("a")
    r["collections"] = repr(
        (Point(1, 2)._replace(y=5), collections.Counter("abracadabra").most_common(3), od, collections.ChainMap({"a": 1}, {"b": 2})["b"], collections.deque(range(5), maxlen=3))
    )  # fmt: skip

    class Color(enum.Enum):
        RED = 1
        GREEN = 2

    class Perm(enum.Flag):
        R = 4
        W = 2
        X = 1

    r["enum"] = repr(
        (Color(2), Color["RED"], list(Color), Perm.R | Perm.W, Perm(7), (Perm.R | Perm.X) & ~Perm.X)
    )

    @dataclasses.dataclass(order=True, frozen=True)
    class Item:
        name: str
        qty: int = 0
        tags: list = dataclasses.field(default_factory=list, compare=False)

    items = sorted([Item("b", 2), Item("a", 5, ["x"])])
    r["dataclasses"] = repr(
        (items, dataclasses.asdict(items[0]), dataclasses.replace(items[1], qty=9))
    )
    src = "def f(a, *, b=2):\n    return [x ** 2 for x in range(a) if x % b]\n"
    tree = ast.parse(src)
    r["ast"] = repr((ast.dump(tree), ast.unparse(tree), ast.literal_eval("{'a': (1, 2.5, -3j)}")))
    r["tokenize"] = repr(
        [(t.type, t.string) for t in tokenize.generate_tokens(io.StringIO(src).readline)]
    )
    r["inspect"] = repr(
        (
            str(inspect.signature(workload)),
            str(inspect.signature(pad_with_nops)),
            inspect.getdoc(transform_code),
        )
    )

    @functools.total_ordering
    class V:
        def __init__(self, v):
            self.v = v

        def __eq__(self, o):
            return self.v == o.v

        def __lt__(self, o):
            return self.v < o.v

    @functools.singledispatch
    def kind(x):
        return "obj"

    @kind.register
    def _(x: int):
        return "int"

    r["functools"] = repr(
        (
            V(1) >= V(0),
            V(2) <= V(1),
            kind(3),
            kind("s"),
            functools.reduce(lambda p, q: p * q, range(1, 8)),
        )
    )
    re.purge()
    pat = re.compile(r"(?P<word>[a-z]+)(?:-(?P<num>\d{2,4}))?", re.I)
    r["re"] = repr(
        (
            [m.groupdict() for m in pat.finditer("abc-123 Def x-99999")],
            re.sub(r"(a|b)+", lambda m: m.group(0).upper(), "aabxba"),
        )
    )
    return r


def _functions_of(module):
    seen = set()
    for value in list(vars(module).values()):
        candidates = [value]
        if isinstance(value, type) and value.__module__ == module.__name__:
            candidates = list(vars(value).values())
        for c in candidates:
            if isinstance(c, (staticmethod, classmethod)):
                c = c.__func__
            if isinstance(c, property):
                parts = [c.fget, c.fset, c.fdel]
            else:
                parts = [c]
            for p in parts:
                if isinstance(p, types.FunctionType) and id(p) not in seen:
                    seen.add(id(p))
                    yield p


def main(edit_name: str) -> None:
    before = workload()
    edit = {
        "round_trip": lambda code: transform_code(code),
        # Blocks shuffled (jumps flip direction, protected ranges split), NOPs inserted
        # (EXTENDED_ARG jumps), every constant and name index moved.
        "edited": lambda code: transform_code(
            code, lambda ins: pad_with_nops(shuffle_blocks(ins, seed=len(ins))), pad_tables=300
        ),
    }[edit_name]
    swapped = 0
    identical = 0
    for name in MODULES:
        module = importlib.import_module(name)
        for fn in _functions_of(module):
            if fn.__code__.co_filename != getattr(module, "__file__", None):
                continue
            new = edit(fn.__code__)
            identical += new.co_code == fn.__code__.co_code
            fn.__code__ = new
            swapped += 1
    # Sanity: the swapped code is ours (disassembles, assembles again).
    assemble(disassemble(textwrap.fill.__code__), template=textwrap.fill.__code__)
    after = workload()
    changed = sorted(k for k in before if before[k] != after[k])
    print(
        json.dumps(
            {
                "swapped": swapped,
                "identical_code": identical,
                "changed": changed,
                "checked": len(before),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
