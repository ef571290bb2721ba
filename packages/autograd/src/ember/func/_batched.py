"""The batched tensor of :func:`ember.func.vmap`, and the stack of active vmap levels.

Inside ``vmap(f)``, ``f`` sees :class:`BatchedTensor` objects: a tensor of the *logical* shape
(one sample's) that holds a real tensor, ``_inner``, with one more dimension, ``_bdim``, along
which the samples lie. Every op that meets one reaches ``BatchedTensor.__ember_function__``,
which hands it to the batching-rule table (:mod:`ember.func._batching_rules`); a rule computes
the whole batch at once by calling registry ops on the inner tensors, so autograd records those
calls and gradients flow through vmapped code.

Nested vmaps give nested batched tensors: each vmap call is a *level* (1 for the outermost), and
a level-``k`` tensor's inner tensor may itself be batched at a lower level. When tensors of
several levels meet in one op, the highest level handles it first and sees the others as
ordinary (unbatched) values; the ops its rule calls on inner tensors then reach the lower levels.
"""

from __future__ import annotations

from ember._shape_only import ShapeOnlyArray
from ember._tensor import Tensor, is_contiguous_strides

__all__ = ["BatchedTensor", "Level", "active_levels", "wrap", "level_of", "lift", "lower"]


class Level:
    """One active vmap call: its number, batch size and randomness mode."""

    __slots__ = ("number", "size", "randomness")

    def __init__(self, number, size, randomness):
        self.number, self.size, self.randomness = number, size, randomness

    def __repr__(self):
        return f"Level({self.number}, size={self.size}, randomness={self.randomness!r})"


#: The active vmap levels, outermost first (``_LEVELS[k - 1].number == k``).
_LEVELS: list[Level] = []


def active_levels():
    """The active vmap levels, outermost first."""
    return tuple(_LEVELS)


def level_info(number):
    """The :class:`Level` numbered ``number``.

    Raises:
        RuntimeError: the level is no longer active (a batched tensor escaped its vmap).
    """
    if number > len(_LEVELS) or _LEVELS[number - 1].number != number:
        raise RuntimeError(
            "a batched tensor escaped the vmap that made it (stored in a global or a closure and used "
            "after the vmapped function returned); return it from the function instead"
        )
    return _LEVELS[number - 1]


class ValuesOfBatchedTensor(RuntimeError):
    """Raised when code reads the values of a batched tensor (``item()``, ``numpy()``, a kernel)."""


class _LogicalArray(ShapeOnlyArray):
    """The ``_data`` of a batched tensor: the logical shape and dtype; reading values raises.

    ``Tensor.shape``, ``dtype``, ``ndim`` and ``numel`` work; anything else a kernel or numpy
    would read raises :class:`ValuesOfBatchedTensor`, so no kernel computes with a batched
    tensor by mistake.
    """

    __slots__ = ()

    def _refuse(self, what):
        raise ValuesOfBatchedTensor(_VALUES_MESSAGE)


_VALUES_MESSAGE = (
    "vmap: the values of a batched tensor were read (item(), tolist(), numpy(), bool() or a kernel that "
    "reads data). A vmapped function cannot branch on or convert its inputs' values: each sample has its own. "
    "Compute with tensor ops instead (ember.where for a branch), or call the function outside vmap."
)


class BatchedTensor(Tensor):
    """A tensor of one sample's shape that stands for a whole batch inside :func:`ember.func.vmap`.

    Attributes:
        _inner (Tensor): the batch (a plain tensor, or a batched tensor of a lower level).
        _bdim (int): the dimension of ``_inner`` along which the samples lie.
        _level (int): the vmap level that made it.
    """

    _inner = None
    _bdim = 0
    _level = 0
    #: Its values can't be read (each sample has its own): ember's indexing keeps a zero-dim integer one as
    #: an index tensor instead of turning it into an int.
    _values_readable = False

    # -- autograd fields are the inner tensor's ---------------------------------------------

    @property
    def requires_grad(self):
        return self._inner.requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad=True):
        raise RuntimeError(
            "vmap: requires_grad_() on a batched tensor is not supported; differentiate with ember.func.grad or "
            "ember.func.vjp inside the vmapped function instead"
        )

    @property
    def grad_fn(self):
        return self._inner.grad_fn

    @property
    def is_leaf(self):
        return self._inner.is_leaf

    # -- things that read values ---------------------------------------------------------------

    def item(self):
        raise ValuesOfBatchedTensor(_VALUES_MESSAGE)

    def tolist(self):
        raise ValuesOfBatchedTensor(_VALUES_MESSAGE)

    def numpy(self, *, force=False):
        raise ValuesOfBatchedTensor(_VALUES_MESSAGE)

    def _host_array(self):
        raise ValuesOfBatchedTensor(_VALUES_MESSAGE)

    def __bool__(self):
        raise ValuesOfBatchedTensor(_VALUES_MESSAGE)

    def data_ptr(self):
        raise ValuesOfBatchedTensor(_VALUES_MESSAGE)

    def stride(self, dim=None):
        # One sample's layout is not defined (the batch dim may lie anywhere in memory); meta functions
        # that decompositions call for their checks read strides, so answer with a contiguous layout.
        shape = self._data.shape
        strides, step = [], 1
        for size in reversed(shape):
            strides.append(step)
            step *= max(size, 1)
        strides = tuple(reversed(strides))
        return strides if dim is None else strides[dim]

    def is_contiguous(self, memory_format=None):
        # the samples' real layout, as PyTorch's batched tensors report it: user code that checks it before a
        # view (or calls contiguous() first) then works as it does outside vmap
        strides = list(self._inner.stride())
        del strides[self._bdim]
        return is_contiguous_strides(self._data.shape, strides)

    def contiguous(self, memory_format=None):
        if self.is_contiguous():
            return self
        return wrap(self._inner.movedim(self._bdim, 0).contiguous(), 0, self._level)

    # new_zeros and friends give batched tensors, so that code which makes a buffer and writes a batched
    # tensor into it (the backward formulas of select, slice, diagonal) works under vmap, as in PyTorch
    def _new(self, name, size, kwargs):
        if len(size) == 1 and isinstance(size[0], (tuple, list)):
            size = tuple(size[0])
        batch = level_info(self._level).size
        return wrap(getattr(self._inner, name)((batch, *size), **kwargs), 0, self._level)

    def new_zeros(self, *size, **kwargs):
        return self._new("new_zeros", size, kwargs)

    def new_ones(self, *size, **kwargs):
        return self._new("new_ones", size, kwargs)

    def new_empty(self, *size, **kwargs):
        return self._new("new_empty", size, kwargs)

    def new_full(self, size, fill_value, **kwargs):
        batch = level_info(self._level).size
        return wrap(self._inner.new_full((batch, *size), fill_value, **kwargs), 0, self._level)

    def as_subclass(self, cls):
        raise RuntimeError("vmap: as_subclass() of a batched tensor is not supported")

    def _set_data(self, array, storage=None):
        raise RuntimeError("vmap: setting .data of a batched tensor is not supported")

    def __repr__(self, *, tensor_contents=None):
        return f"BatchedTensor(level={self._level}, bdim={self._bdim}, value={self._inner!r})"

    # -- every op goes to the batching rules -----------------------------------------------------

    @classmethod
    def __ember_function__(cls, func, types, args=(), kwargs=None):
        for t in types:
            if not issubclass(t, Tensor):
                return NotImplemented  # an FX Proxy among the arguments records the call
        return _batch_call(func, args, kwargs or {})


def _batch_call(func, args, kwargs):
    """``_batching_rules.batch_call``, imported on first use (that module imports this one)."""
    global _batch_call
    from ._batching_rules import batch_call

    _batch_call = batch_call
    return batch_call(func, args, kwargs)


def wrap(inner, bdim, level):
    """A :class:`BatchedTensor` of level ``level`` over ``inner``, samples along ``inner``'s dim ``bdim``."""
    t = object.__new__(BatchedTensor)
    t._inner = inner
    t._bdim = bdim
    t._level = level
    shape = tuple(inner.shape)
    t._data = _LogicalArray(shape[:bdim] + shape[bdim + 1 :], inner._data.dtype)
    t._device = inner._device
    return t


def level_of(x):
    """The vmap level of ``x`` (0 for anything that is not a batched tensor)."""
    return x._level if isinstance(x, BatchedTensor) else 0


def lift(x, top=None):
    """``x`` as a tensor batched at levels 1..``top`` in its dims: ``(B_1, ..., B_top, *logical shape)``.

    ``top`` defaults to every active level, giving a plain tensor. Levels at which ``x`` is not
    batched are expanded (a view); levels above ``top`` stay batched tensors around the result.
    This is the common form in which :mod:`ember.func`'s autograd transforms hand tensors to the
    reverse-mode engine: each sample's computation is independent, so differentiating the sum over
    the batch gives every sample's derivative.
    """
    return _lift(x, len(_LEVELS) if top is None else top)


def _lift(x, top):
    if isinstance(x, BatchedTensor) and x._level > top:  # keep the higher level around the lifted inner tensor
        return wrap(_lift(x._inner, top), x._bdim + top, x._level)
    if top == 0:
        return x
    if isinstance(x, BatchedTensor) and x._level == top:
        inner = x._inner
        if x._bdim != 0:
            inner = inner.movedim(x._bdim, 0)
        return _lift(inner, top - 1)  # inner is (B_top, *shape) at the lower levels: already in order
    size = _LEVELS[top - 1].size
    below = _lift(x, top - 1)  # (B_1..B_{top-1}, *shape)
    if top == 1:  # expand adds the leading dim itself: one op
        return below.expand(size, *below.shape)
    return below.unsqueeze(top - 1).expand(*below.shape[: top - 1], size, *below.shape[top - 1 :])


def lower(p, top=None):
    """The inverse of :func:`lift`: ``(B_1, ..., B_top, *shape)`` as batched tensors of levels 1..``top``."""
    return _lower(p, len(_LEVELS) if top is None else top)


def _lower(p, top):
    if isinstance(p, BatchedTensor) and p._level > top:
        inner, bdim = p._inner, p._bdim
        if bdim < top:
            inner, bdim = inner.movedim(bdim, top), top
        return wrap(_lower(inner, top), bdim - top, p._level)
    for level in _LEVELS[:top]:
        p = wrap(p, 0, level.number)
    return p
