"""Running generated Triton code: helper functions the kernels call (:mod:`.triton_helpers`), compiling and
launching kernels on ember tensors (:mod:`.triton_launch`) and the graph runner (:mod:`.triton_graph`).

Nothing here is imported by ``import ember._inductor``: Triton is an optional dependency
(``pip install ember-inductor[triton]``).
"""
