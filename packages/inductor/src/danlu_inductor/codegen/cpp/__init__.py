"""The C++/OpenMP backend: kernels as C++ functions, gcc, an on-disk cache, ctypes."""
