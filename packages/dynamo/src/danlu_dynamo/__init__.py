"""Graph capture for PyTorch programs: a PEP 523 frame hook, a symbolic bytecode interpreter, guards and graph breaks."""

__version__ = "0.1.0.dev0"
