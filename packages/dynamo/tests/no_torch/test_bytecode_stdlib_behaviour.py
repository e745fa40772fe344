"""Stdlib functions keep working when their code is replaced by assembled code.

Each edit runs in a fresh interpreter (the swap is process-wide): results of a workload over
json, textwrap, difflib, statistics, fractions, argparse, pprint, re, enum, dataclasses, ...
are computed with the original code, then with every function of those modules swapped.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

import danlu_dynamo

HERE = pathlib.Path(__file__).parent


@pytest.mark.parametrize("edit", ["round_trip", "edited"])
def test_stdlib_functions_behave_the_same_with_assembled_code(edit):
    env = dict(os.environ)
    # The child imports the same danlu_dynamo as this process, and the test helpers.
    package_root = str(pathlib.Path(danlu_dynamo.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(HERE), package_root, env.get("PYTHONPATH")])
    )
    proc = subprocess.run(
        [sys.executable, str(HERE / "bytecode_stdlib_workload.py"), edit],
        capture_output=True,
        text=True,
        env=env,
        cwd=HERE,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["swapped"] > 1000, report
    assert report["checked"] >= 25
    assert report["changed"] == [], report
    if edit == "round_trip":
        assert report["identical_code"] == report["swapped"]
    else:
        assert report["identical_code"] == 0
