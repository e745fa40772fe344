"""`nox -s demo`: what danlu can do so far.

The umbrella `danlu.compile` grows into this demo; until then it shows which packages are
installed and imports each one.
"""

from __future__ import annotations

import importlib
from importlib.metadata import version

PACKAGES = [
    ("danlu-primtorch", "danlu_primtorch"),
    ("danlu-dynamo", "danlu_dynamo"),
    ("danlu-aotautograd", "danlu_aotautograd"),
    ("danlu-inductor", "danlu_inductor"),
    ("danlu", "danlu"),
]


def main() -> None:
    import torch

    print(f"torch {torch.__version__}")
    for dist, mod in PACKAGES:
        importlib.import_module(mod)
        print(f"  {dist:18} {version(dist)}")


if __name__ == "__main__":
    main()
