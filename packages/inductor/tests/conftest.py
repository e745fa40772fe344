import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))

# Every graph the suite compiles goes through the loop-IR checker (ir/verify.py); measured
# cost: see the CHANGELOG. DANLU_VERIFY_IR=0 turns it off.
os.environ.setdefault("DANLU_VERIFY_IR", "1")


@pytest.fixture(scope="session", autouse=True)
def _omp_threads():
    # the tests share a 2-core machine; the kernels' results do not depend on thread count
    os.environ.setdefault("OMP_NUM_THREADS", "2")


def pytest_terminal_summary(terminalreporter):
    verify = sys.modules.get("danlu_inductor.ir.verify")
    if verify is not None and verify.STATS["graphs"]:
        s = verify.STATS
        terminalreporter.write_line(
            f"loop-IR checker: {s['graphs']} graphs in {s['seconds']:.2f} s (this process)"
        )
