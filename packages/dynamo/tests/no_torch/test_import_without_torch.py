"""The frame hook and bytecode layer must import on interpreters where torch is absent."""

import importlib.util
import subprocess
import sys


def test_package_imports_without_pulling_in_torch():
    code = (
        "import sys, danlu_dynamo; print(danlu_dynamo.__version__); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    version, torch_loaded = out.stdout.split()
    assert version.count(".") >= 2
    assert torch_loaded == "False" or importlib.util.find_spec("torch") is not None
