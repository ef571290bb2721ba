"""The op registry: one :class:`Op` per public operator.

An op bundles what every subsystem needs to know about an operator:

* its **signature** (taken from the meta function), used for argument
  normalisation, FX, docs and error messages;
* its **meta** function: from input metadata alone it checks the arguments
  and returns the outputs as :class:`~ember._meta.MetaArray` (shape, dtype,
  strides); it is also the op's kernel on the ``meta`` device;
* its **category**: ``"prim"`` (a backend must implement it) or
  ``"composite"`` (it has a decomposition into other ops, used wherever a
  backend has no kernel of its own);
* its **kind**: ``"function"`` (new outputs), ``"view"`` (outputs alias the
  first argument's storage), ``"inplace"`` (mutates the first argument and
  returns it) or ``"other"`` (returns Python values, e.g. ``item``);
* its **kernels**, one per device type (``"cpu"``, ``"cuda"``, out-of-tree).

Kernels take the op's arguments with tensors replaced by nothing: they get
the tensors themselves and read ``t._data``, and return backend arrays; the
dispatcher wraps them (see :mod:`ember._ops._dispatch`). Other subsystems key
their own tables by these ``Op`` objects (autograd's derivatives, inductor's
lowerings, vmap's batching rules).
"""

from __future__ import annotations

import functools
import inspect

from .._tensor import Tensor
from . import _dispatch

__all__ = ["Op", "registry", "defop", "get", "PRIM", "COMPOSITE"]

PRIM = "prim"
COMPOSITE = "composite"
_KINDS = ("function", "view", "inplace", "other")

#: Parameter names that take a tensor (some ops also take a Python number there) and never a list or
#: tuple: the dispatcher refuses a list or tuple given for them with PyTorch's TypeError ("add():
#: argument 'input' (position 1) must be Tensor, not list") before any meta function or kernel reads
#: it (a list once reached them and failed with "'list' object has no attribute '_data'", or, in the
#: checked pointwise kernels, was taken for an array). Parameters that do take sequences (``size``,
#: ``dims``, ``tensors``, ``indices``, ``input_lengths``...) are not listed.
TENSOR_PARAMETERS = frozenset({
    "input", "self", "other", "weight", "bias", "target", "targets", "src", "mask", "tensor", "tensor1",
    "tensor2", "mat", "mat1", "mat2", "vec", "vec1", "vec2", "batch1", "batch2", "x1", "x2", "input1", "input2",
    "grad_output", "output", "condition", "exponent", "query", "key", "anchor", "positive", "negative",
    "log_probs", "boundaries", "sorted_sequence", "values", "weights", "prepend", "append", "offsets",
    "per_sample_weights", "pos_weight", "running_mean", "running_var", "grid", "theta", "attn_mask", "var",
    "logits", "a", "b", "real", "imag", "abs", "angle", "q", "repeats",
})

#: More tensor parameters of single ops, whose names mean something else elsewhere (``select``'s
#: ``index`` is an int, ``movedim``'s ``source`` a dim or dims, ``max_unpool``'s ``indices`` a tensor but
#: ``index``'s a list of them).
_MORE_TENSOR_PARAMETERS = {
    "lerp": ("end",), "index_select": ("index",), "gather": ("index",), "scatter": ("index",),
    "scatter_add": ("index",), "scatter_reduce": ("index",), "index_add": ("index", "source"),
    "index_copy": ("index", "source"), "index_reduce": ("index", "source"), "index_fill": ("index",),
    "masked_scatter": ("source",), "put": ("index", "source"), "take": ("index",),
    "take_along_dim": ("indices",), "max_unpool1d": ("indices",), "max_unpool2d": ("indices",),
    "max_unpool3d": ("indices",), "scaled_dot_product_attention": ("value",),
}

#: Every op by name, in registration order.
registry: dict[str, Op] = {}


class Op:
    """A registered operator. Calling it dispatches (see :mod:`ember._ops._dispatch`).

    Attributes:
        name (str): the public name (``"add"``, ``"add_"``).
        meta (callable): argument checks and output metadata.
        category (str): ``"prim"`` or ``"composite"``.
        kind (str): ``"function"``, ``"view"``, ``"inplace"`` or ``"other"``.
        kernels (dict[str, callable]): kernels by device type.
        decomposition (callable or None): the composite's definition in other ops.
        signature (inspect.Signature): the public signature, ``out`` included when supported.
        has_out (bool): whether the op takes ``out=``.
        inplace (Op or None): the in-place variant (``add`` -> ``add_``).
        functional (Op or None): for an in-place op, its out-of-place op.
        tags (frozenset[str]): free-form properties (``"pointwise"``, ``"reduction"``,
            ``"random"``, ...).
        return_type (type or None): a namedtuple class for ops with several named outputs.
        checked_kernels (dict[str, callable]): optional *checked* kernels by device type, for
            ``"function"`` ops (see :meth:`register_checked_kernel`): called with the positional
            arguments of a call without keywords, one does the meta function's checks itself for
            the calls it takes and returns the result array, or None to leave the call to the
            meta function and the op's kernel. They spare the hot path of small ops a separate
            meta call. They compute with the backend alone, never dispatching ops, so autograd
            may call them without turning grad mode off.
        view_kernels (dict[str, callable]): optional *view* kernels by device type, for ``"view"`` ops
            without a kernel (see :meth:`register_view_kernel`): the common calls' view built by the
            backend array's own method, without the meta function.
        decomposition_checks (bool): for a composite op, whether its decomposition raises every
            error its meta function would (``reshape``, ``flatten``): the dispatcher and autograd
            then run the decomposition without calling the meta function first.
    """

    decomposition_checks = False

    def __init__(
        self,
        name,
        meta,
        *,
        category=PRIM,
        kind="function",
        decomposition=None,
        has_out=False,
        doc=None,
        tags=(),
        return_type=None,
    ):
        if category not in (PRIM, COMPOSITE):
            raise ValueError(f"op {name}: category must be 'prim' or 'composite', got {category!r}")
        if kind not in _KINDS:
            raise ValueError(f"op {name}: kind must be one of {_KINDS}, got {kind!r}")
        if category == COMPOSITE and decomposition is None:
            raise ValueError(f"op {name}: a composite op needs a decomposition")
        self.name = name
        self.meta = meta
        self.category = category
        self.kind = kind
        self.kernels = {"meta": meta}
        self.checked_kernels = {}
        self.view_kernels = {}
        self.decomposition = decomposition
        self.has_out = has_out
        self.inplace = None
        self.functional = None
        self.tags = frozenset(tags)
        self.return_type = return_type
        self.__name__ = self.__qualname__ = name
        self.__module__ = "ember"
        self.__doc__ = doc if doc is not None else meta.__doc__

    # The signatures are read from the meta function on first use, then kept: inspect.signature
    # of every op was a noticeable part of ``import ember``, and a program reads few of them.
    @functools.cached_property
    def _call_signature(self):
        """The meta function's signature (no ``out``): what a call binds to."""
        return inspect.signature(self.meta)

    @functools.cached_property
    def signature(self):
        sig = self._call_signature
        if self.has_out:
            params = list(sig.parameters.values())
            params.append(inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None))
            sig = sig.replace(parameters=params)
        return sig

    @property
    def __signature__(self):  # what inspect.signature(op) reports
        return self.signature

    @functools.cached_property
    def tensor_parameters(self):
        """The parameters that take a tensor (or a number), never a list or tuple: ``(position, name)``
        pairs, position None for keyword-only ones (see :data:`TENSOR_PARAMETERS`)."""
        names = TENSOR_PARAMETERS.union(_MORE_TENSOR_PARAMETERS.get(self.name, ()))
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        result = []
        # positional parameters come first, so their index in the signature is their position
        for index, parameter in enumerate(self._call_signature.parameters.values()):
            if parameter.name in names and parameter.kind is not inspect.Parameter.VAR_POSITIONAL:
                result.append((index if parameter.kind in positional else None, parameter.name))
        return tuple(result)

    def _tensor_arguments(self, args, kwargs):
        """``(name, position or None, value)`` for each tensor parameter given in a call."""
        count = len(args)
        for position, name in self.tensor_parameters:
            if position is not None and position < count:
                yield name, position, args[position]
            elif kwargs and name in kwargs:
                yield name, None, kwargs[name]

    def _not_tensor(self, name, position, value):
        """PyTorch's TypeError for a non-tensor ``value`` given for tensor parameter ``name``."""
        where = "" if position is None else f" (position {position + 1})"
        return TypeError(f"{self.name}(): argument '{name}'{where} must be Tensor, not {type(value).__name__}")

    @functools.cached_property
    def _positional_tensor_parameters(self):
        return tuple((position, name) for position, name in self.tensor_parameters if position is not None)

    def check_not_sequences(self, args, kwargs):
        """Refuse a list or tuple given for a tensor parameter (see :data:`TENSOR_PARAMETERS`).

        The dispatcher calls this only for calls that hold a list or tuple argument, once per call, so a
        plain ``a + b`` never pays for it and conv's ``stride=(1, 1)`` pays one short loop.

        Raises:
            TypeError: "add(): argument 'input' (position 1) must be Tensor, not list", as PyTorch words it.
        """
        count = len(args)
        for position, name in self._positional_tensor_parameters:
            if position < count:
                t = type(args[position])
                if t is list or t is tuple:
                    raise self._not_tensor(name, position, args[position])
        if kwargs:
            for position, name in self.tensor_parameters:
                t = type(kwargs.get(name))
                if (t is list or t is tuple) and (position is None or position >= count):
                    raise self._not_tensor(name, None, kwargs[name])

    def explain_attribute_error(self, args, kwargs, error):
        """Raise PyTorch's TypeError for an AttributeError that a non-tensor given for a tensor parameter caused.

        Many ops take a Python number where they take a tensor (``ember.add(t, 2)``), others do not
        (``ember.clone(2.0)``), and nothing but the meta function knows which: the dispatcher does not
        check numbers ahead (the hot path would pay for it). When a meta function or kernel then reads
        a tensor attribute of a number (``'float' object has no attribute '_data'``), the dispatcher
        calls this, which names the argument instead; it returns (and the AttributeError propagates)
        when no such argument explains ``error``.

        Raises:
            TypeError: "clone(): argument 'input' (position 1) must be Tensor, not float".
        """
        message = str(error)
        for name, position, value in self._tensor_arguments(args, kwargs):
            if value is None or isinstance(value, Tensor) or hasattr(type(value), "__ember_function__"):
                continue
            if f"'{type(value).__name__}' object has no attribute" in message:
                raise self._not_tensor(name, position, value) from None

    def __call__(self, /, *args, **kwargs):  # positional-only: an op may name an argument "self"
        return _dispatch.dispatch(self, args, kwargs)

    def register_kernel(self, device_type, kernel=None):
        """Register ``kernel`` for ``device_type``; usable as a decorator.

        Raises:
            RuntimeError: if this op already has a kernel for that device type.
        """

        def add(fn):
            if device_type in self.kernels:
                raise RuntimeError(f"op {self.name} already has a kernel for device type '{device_type}'")
            self.kernels[device_type] = fn
            return fn

        return add if kernel is None else add(kernel)

    def register_checked_kernel(self, device_type, kernel):
        """Register ``kernel`` as the checked kernel of ``device_type`` (replacing any before it).

        A checked kernel takes the positional arguments of a call without keywords and returns
        the result array (of the device's backend), or None to decline: the call then takes the
        meta function and the op's kernel. It must raise nothing the meta function would not,
        and decline every call it does not check completely. The dispatcher wraps its array.
        ``kernel=None`` removes the entry. Returns ``kernel``.
        """
        if kernel is None:
            self.checked_kernels.pop(device_type, None)
        else:
            self.checked_kernels[device_type] = kernel
        return kernel

    def register_view_kernel(self, device_type, kernel):
        """Register ``kernel`` as the view kernel of ``device_type`` for this view op (replacing any before it).

        A view kernel takes the positional arguments of a call without keywords and returns a backend array
        that views the first argument's array (``numpy.ndarray.reshape`` of a C-contiguous array), or None to
        decline: the call then takes the meta function and the backend's strided view. Its array must have
        the meta function's shape and strides exactly (tests compare them); it must raise nothing and decline
        every call it does not check completely. ``kernel=None`` removes the entry. Returns ``kernel``.
        """
        if self.kind != "view":
            raise RuntimeError(f"op {self.name}: a view kernel is for view ops, not {self.kind!r} ones")
        if kernel is None:
            self.view_kernels.pop(device_type, None)
        else:
            self.view_kernels[device_type] = kernel
        return kernel

    def normalize(self, args, kwargs):
        """Bind a call's arguments to the signature: ``(args, kwargs)`` with defaults applied.

        Positional-or-keyword parameters come back positional, keyword-only ones
        as keywords, so two calls that mean the same thing look the same.
        ``out`` is not part of it: the dispatcher handles ``out=`` above the modes.

        Raises:
            TypeError: naming the op when the arguments don't fit the signature.
        """
        try:
            bound = self._call_signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.name}(): {exc}") from None
        bound.apply_defaults()
        return bound.args, bound.kwargs

    def __repr__(self):
        return f"<ember op {self.name} ({self.category}, {self.kind})>"

    def __reduce__(self):
        return (get, (self.name,))


def defop(
    name,
    meta,
    *,
    cpu=None,
    category=PRIM,
    kind="function",
    decomposition=None,
    has_out=False,
    doc=None,
    tags=(),
    return_type=None,
):
    """Create and register an op (see :class:`Op`); ``cpu`` is its CPU kernel.

    Raises:
        RuntimeError: if an op of that name is already registered.
    """
    if name in registry:
        raise RuntimeError(f"op {name} is already registered")
    op = Op(
        name,
        meta,
        category=category,
        kind=kind,
        decomposition=decomposition,
        has_out=has_out,
        doc=doc,
        tags=tags,
        return_type=return_type,
    )
    if cpu is not None:
        op.register_kernel("cpu", cpu)
    registry[name] = op
    return op


def get(name):
    """The registered op called ``name``.

    Raises:
        KeyError: if there is none.
    """
    try:
        return registry[name]
    except KeyError:
        raise KeyError(f"no op named {name!r} in the ember op registry") from None
