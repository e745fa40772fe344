"""Code objects from the standard library, used as round-trip material by the bytecode tests."""

from __future__ import annotations

import functools
import importlib
import types

STDLIB_MODULES = [
    "json.decoder",
    "json.encoder",
    "json.scanner",
    "json",
    "re._parser",
    "re._compiler",
    "re",
    "textwrap",
    "collections",
    "argparse",
    "ast",
    "dataclasses",
    "difflib",
    "pprint",
    "string",
    "shlex",
    "fractions",
    "statistics",
    "heapq",
    "bisect",
    "enum",
    "functools",
    "inspect",
    "tokenize",
    "typing",
    "contextlib",
    "asyncio.tasks",
    "email.message",
    "pathlib",
    "_pydecimal",
    "unittest.case",
    "configparser",
    "calendar",
    "csv",
    "ipaddress",
    "zipfile",
    "tarfile",
    "logging",
    "subprocess",
    "http.client",
    "urllib.parse",
    "optparse",
    "gettext",
    "pickle",
    "copy",
    "random",
    "tempfile",
    "shutil",
    "traceback",
    "doctest",
    "pydoc",
    "selectors",
    "threading",
    "socket",
    "codecs",
    "base64",
    "dis",
    "opcode",
    "locale",
    "mailbox",
    "smtplib",
    "ftplib",
    "imaplib",
    "poplib",
    "xml.dom.minidom",
    "xml.etree.ElementTree",
    "html.parser",
    "plistlib",
    "sysconfig",
    "platform",
]


def walk_code(code: types.CodeType):
    """`code` and every code object nested in its constants."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from walk_code(const)


@functools.cache
def _compiled(name: str) -> tuple[types.CodeType, ...]:
    module = importlib.import_module(name)
    path = module.__file__
    if path is None or not path.endswith(".py"):
        return ()
    with open(path, encoding="utf-8") as f:
        source = f.read()
    return tuple(walk_code(compile(source, path, "exec")))


def module_code_objects(name: str) -> list[types.CodeType]:
    """All code objects of a stdlib module, compiled from its source by this interpreter
    (compiled once per test session)."""
    return list(_compiled(name))
