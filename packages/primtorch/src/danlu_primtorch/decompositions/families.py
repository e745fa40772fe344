"""Import every family file, so that each registers its decompositions."""

from danlu_primtorch.decompositions import (  # noqa: F401
    activations,
    creation,
    indexing,
    losses,
    matmul,
    misc,
    norms,
    pointwise,
    pooling,
    random,
    reductions,
    upsample,
    views,
)
