"""Code generation: kernels (per backend) and the Python wrapper that calls them."""
