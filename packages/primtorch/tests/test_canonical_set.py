"""The canonical ATen set is functional and primitive enough for a loop compiler; the tables agree."""

import pytest
import torch

import danlu_primtorch
from danlu_primtorch.canonical import (
    CANONICAL_BY_GROUP,
    CANONICAL_OPS,
    canonical_group,
    is_canonical,
)
from danlu_primtorch.decompositions.registry import only_composite_implicit
from danlu_primtorch.decompositions.table import _prim_table

aten = torch.ops.aten


@pytest.mark.parametrize("op", sorted(CANONICAL_OPS, key=str), ids=str)
def test_canonical_op_is_functional_and_not_composite(op):
    schema = op._schema
    assert not schema.is_mutable, f"{op} mutates an input"
    assert not any(a.is_out for a in schema.arguments), f"{op} is an out= variant"
    assert torch.Tag.inplace_view not in op.tags
    assert not schema.name.endswith("_") or schema.name.startswith("_"), f"{op} looks in-place"
    assert not only_composite_implicit(op), f"{op} never reaches a backend (composite implicit)"
    # only the view group may return aliases of its inputs
    aliasing = any(r.alias_info is not None for r in schema.returns)
    assert not aliasing or canonical_group(op) == "views", f"{op} aliases but is not a view"


def test_groups_partition_the_set():
    total = sum(len(g) for g in CANONICAL_BY_GROUP.values())
    assert total == len(CANONICAL_OPS), "an op is listed in two groups"
    assert is_canonical(aten.add.Tensor) and not is_canonical(aten.add.Scalar)
    assert not is_canonical(aten.add), "packets are not canonical, overloads are"
    assert canonical_group(aten.mm.default) == "extern kernels"
    assert canonical_group(aten.add_.Tensor) is None


def test_canonical_table_never_decomposes_a_canonical_op():
    table = danlu_primtorch.decomposition_table("canonical")
    assert not set(table) & CANONICAL_OPS
    for op in table:
        assert isinstance(op, torch._ops.OpOverload)
        assert not op._schema.is_mutable, f"{op} in the table mutates"
        assert not only_composite_implicit(op), f"{op} is composite implicit"


def test_prims_table_is_the_canonical_table_plus_the_prim_decompositions():
    canon = danlu_primtorch.decomposition_table("canonical")
    prims = danlu_primtorch.decomposition_table("prims")
    prim_side = _prim_table()
    assert prim_side, "the canonical -> prims table is missing"
    for op, fn in canon.items():
        assert prims[op] is fn
    for op in prim_side:
        assert op in prims
    assert len(prims) == len(canon) + len(set(prim_side) - set(canon))


def test_bad_level_is_a_clear_error():
    with pytest.raises(ValueError, match="level must be one of"):
        danlu_primtorch.decomposition_table("prim")


def test_register_refuses_what_would_break_the_table():
    from danlu_primtorch.decompositions.registry import register

    with pytest.raises(ValueError, match="canonical"):
        register(aten.add.Tensor)(lambda *a: None)
    with pytest.raises(ValueError, match="mutates"):
        register(aten.add_.Tensor)(lambda *a: None)
    with pytest.raises(ValueError, match="CompositeImplicitAutograd"):
        register(aten.linear.default)(lambda *a: None)
    with pytest.raises(TypeError):
        register(aten.gelu)(lambda *a: None)
