"""Ahead-of-time autograd: joint tracing, functionalization, decompositions, partitioners."""
