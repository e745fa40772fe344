"""danlu.compile(model): one line that makes PyTorch training and inference faster."""

__version__ = "0.1.0.dev0"
