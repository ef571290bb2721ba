"""Code generation: C++/OpenMP kernels and the wrapper that calls them in order."""
