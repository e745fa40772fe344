import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))


@pytest.fixture(scope="session", autouse=True)
def _omp_threads():
    # the tests share a 2-core machine; the kernels' results do not depend on thread count
    os.environ.setdefault("OMP_NUM_THREADS", "2")
