"""Package code must not use torch's own compiler stack (DESIGN.md, "What we take from torch")."""

import importlib.util
import pathlib

REPO = pathlib.Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location(
    "check_boundaries", REPO / "tools" / "check_boundaries.py"
)
boundaries = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(boundaries)


def test_no_package_imports_torch_compiler_stack():
    roots = boundaries.package_sources(REPO)
    assert len(roots) == 5, roots
    hits = boundaries.scan(roots)
    assert not hits, "package code reaches into torch's compiler stack:\n" + "\n".join(hits)


def test_scanner_reports_file_and_line_of_a_forbidden_import(tmp_path):
    src = tmp_path / "pkg" / "src" / "mod"
    src.mkdir(parents=True)
    (src / "ok.py").write_text("import torch\nimport torch.fx\nx = torch.ops.aten.add\n")
    (src / "bad.py").write_text(
        "import torch\n\nimport torch._inductor\nfrom torch._decomp import core_aten_decompositions\n"
        "from torch import _dynamo\ny = torch._refs.add\nf = torch.compile(lambda x: x)\n"
        "from torch.fx.experimental.proxy_tensor import make_fx\n"
    )
    hits = boundaries.scan([tmp_path / "pkg" / "src"])
    bad = str(src / "bad.py")
    assert hits == [
        f"{bad}:3: uses torch._inductor (torch._inductor)",
        f"{bad}:4: uses torch._decomp (torch._decomp)",
        f"{bad}:5: uses torch._dynamo (torch._dynamo)",
        f"{bad}:6: uses torch._refs (torch._refs.add)",
        f"{bad}:7: calls torch.compile",
        f"{bad}:8: uses torch.fx.experimental.proxy_tensor (torch.fx.experimental.proxy_tensor)",
    ]
