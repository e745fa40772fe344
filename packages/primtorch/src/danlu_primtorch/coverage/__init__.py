"""Coverage of ATen by danlu_primtorch: which ops are prims, canonical, decomposed, or not handled,
and how their decompositions fare on OpInfo samples. ``python -m danlu_primtorch.coverage``."""
