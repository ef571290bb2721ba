"""Tensor layouts: ``ember.strided``, ``ember.sparse_coo``, ``ember.sparse_csr`` (PyTorch's ``torch.layout``).

A layout says how a tensor's elements are stored. Dense tensors are ``strided``
(one backend array viewed with strides); sparse tensors keep only their
specified elements (see :mod:`ember.sparse` and docs/internals.rst, "Sparse
tensors"). Each layout is a singleton, so ``t.layout is ember.sparse_coo`` and
``==`` both work.
"""

from __future__ import annotations

__all__ = ["layout", "strided", "sparse_coo", "sparse_csr", "check_strided"]


class layout:  # noqa: N801 - PyTorch's name (torch.layout)
    """The storage layout of a tensor; the instances are ``ember.strided``, ``ember.sparse_coo``, ``ember.sparse_csr``.

    Example:
        >>> import ember
        >>> ember.zeros(2).layout
        ember.strided
    """

    __slots__ = ("name",)
    _instances: dict = {}

    def __new__(cls, name):
        existing = cls._instances.get(name)
        if existing is not None:
            return existing
        if name not in ("strided", "sparse_coo", "sparse_csr"):
            raise ValueError(f"unknown layout {name!r}; ember has strided, sparse_coo and sparse_csr")
        self = object.__new__(cls)
        self.name = name
        cls._instances[name] = self
        return self

    def __repr__(self):
        return f"ember.{self.name}"

    def __reduce__(self):
        return (layout, (self.name,))


strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")


def check_strided(op, given):
    """Refuse a ``layout=`` value (``given``) other than ``ember.strided`` or None for the factory ``op``.

    Ember's factories make strided tensors only; a sparse layout would otherwise be ignored
    and a dense tensor returned.

    Raises:
        TypeError: if ``layout`` is not an ``ember.layout``.
        NotImplementedError: for ``ember.sparse_coo``/``ember.sparse_csr``, naming the sparse
            constructors to use instead.
    """
    if given is None or given is strided:
        return
    if not isinstance(given, layout):
        raise TypeError(f"{op}(): argument 'layout' must be ember.layout, not {type(given).__name__}")
    raise NotImplementedError(
        f"ember.{op}(layout={given!r}) is not supported: factories make strided tensors; build a sparse "
        "tensor with ember.sparse_coo_tensor / ember.sparse_csr_tensor or convert with Tensor.to_sparse()"
    )
