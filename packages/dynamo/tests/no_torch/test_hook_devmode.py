"""The frame hook tests again under `python -X dev` (debug allocators, extra checks)."""

import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).parent


def test_hook_suite_passes_under_dev_mode():
    files = sorted(
        str(p) for p in HERE.glob("test_hook_*.py") if p.name != pathlib.Path(__file__).name
    )
    assert files
    proc = subprocess.run(
        [sys.executable, "-X", "dev", "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert " passed" in proc.stdout
