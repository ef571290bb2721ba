"""Functionalization: trace a function on meta tensors into a graph without mutation.

:class:`FunctionalTracer` is a dispatch mode. It runs every op for real on meta tensors
(so autograd records exactly what it records in eager mode, in-place ops included) and
appends a node for it to an FX graph, but the graph it writes is *functional*.

The rule
--------

* Every tensor belongs to one **storage** (a :class:`_Root`): a graph input, a constant,
  or the output of a non-view op. The storage has a *current value*: the graph node that
  holds its contents now. A tensor made by view ops is the storage's value seen through
  its **view chain** (the view ops and their arguments, from the storage to the tensor).
* Reading a tensor gives the node of its current value. A view read after its storage
  was written is rebuilt by replaying its view chain on the storage's new value.
* An in-place op never reaches the graph:

  - a composite in-place op (``add_``, ``relu_``, ...) runs its decomposition, which is
    the functional op followed by ``copy_``;
  - an op called with ``inplace=True`` (``relu(x, inplace=True)``) runs with
    ``inplace=False`` followed by ``copy_``;
  - ``out=`` is a ``copy_`` already (the dispatcher turns it into one);
  - the remaining in-place prims are replaced by functional ops: ``copy_(dst, src)`` by
    ``src`` cast to ``dst``'s dtype and expanded to its shape, ``fill_`` by
    ``full_like``, ``zero_`` by ``zeros_like``, ``index_put_`` by ``index_put``.
    In-place random ops (``uniform_``, ``normal_``, ...) are refused with a clear error.

  The written value becomes the storage's new current value; a write through a view is
  scattered into the storage's value: through select/slice/reshape/permute views with pads,
  wheres and inverse views (pointwise, fused by the compiler), through other views by
  pushing the storage's element positions (an ``arange``) through the same view chain,
  then ``index_put`` places the new elements.
* Functions that update some arguments as a side effect (``batch_norm`` in training
  with running statistics, ``instance_norm`` with ``use_input_stats``) run their
  decomposition, whose updates are ``copy_`` calls.
* Composite ops that autograd differentiates through their decomposition are traced
  through it when grad is recorded, so every tensor autograd saves is a graph value.
* A decomposition of the caller's table that needs tensor values (a singularity check
  reading ``info``) is abandoned: the op is recorded whole, as an extern call.

After tracing, :attr:`FunctionalTracer.inputs` tells which graph inputs were written
(their storage's ``version`` is above 0) and their final values; the caller returns those
values and copies them into the caller's tensors (``aot.api``). A traced output whose
storage is a graph input is a view of that input: :meth:`FunctionalTracer.input_alias`
gives its view chain, so the runtime rebuilds it as a view of the real input, as eager
mode returns it.

Factory calls (and moves, ``.to(device)``) run on ``meta`` during the trace; the graph
records them with the device they name (a ``meta`` device argument becomes the device of
the real inputs). Tensors built from
data on ``meta`` (``ember.tensor(array, device=x.device)``, as backward formulas build
their pooling weights and indices) keep their data: :meth:`FunctionalTracer.capturing`
records what the meta backend was given, and such a tensor becomes a graph constant on
the real device.
"""

from __future__ import annotations

import contextlib
import contextvars
import operator

import numpy as np

import ember
from ember._ops import registry
from ember.utils._python_dispatch import DispatchMode
from ember.utils._pytree import tree_flatten

from ..exc import InductorError

__all__ = ["FunctionalTracer", "meta_copy", "is_random_op", "reads_values"]

# ops whose only effect is to write an argument, replaced by a functional op (see the docstring)
_MUTATING_PRIMS = ("copy_", "fill_", "zero_", "index_put_")


def is_random_op(op):
    """Whether ``op`` draws from a random generator (its tags say ``random``)."""
    return "random" in getattr(op, "tags", ())


def meta_copy(value):
    """A detached meta tensor with ``value``'s shape, strides and dtype (tuples element-wise)."""
    if isinstance(value, ember.Tensor):
        if value.layout is not ember.strided:  # a sparse graph input (opaque: only _sparse_mm reads it)
            from ember.sparse._graph import meta_like

            return meta_like(value)
        return ember.empty_strided(tuple(value.shape), tuple(value.stride()), dtype=value.dtype, device="meta")
    if isinstance(value, (tuple, list)):
        return tuple(meta_copy(v) for v in value)
    return value


# views _scatter_views undoes without an index scatter
_INVERTIBLE_VIEWS = ("view", "reshape", "unsqueeze", "squeeze", "flatten", "unflatten", "transpose", "permute",
                     "select", "slice")

# factories whose value is all zeros (a scatter into them needs no ``where``)
_ZERO_FACTORIES = ("zeros", "zeros_like")


def _is_zeros(node):
    """Whether graph node ``node`` is a zeros factory or a view of one."""
    while isinstance(node, ember.fx.Node) and node.op == "call_function":
        name = getattr(node.target, "name", None)
        if name in _ZERO_FACTORIES:
            return True
        if name not in _INVERTIBLE_VIEWS and name != "expand":
            return False
        node = node.args[0]
    return False


def _norm_dim(dim, ndim):
    return dim + ndim if dim < 0 else dim


def _view_args(op, rest, kwargs, shape):
    """The arguments of a view step of a base of ``shape``, in the form ``_scatter_views`` inverts, or None.

    ``transpose``: ``(dim0, dim1)``; ``permute``: the dims, normalised; ``select`` and ``slice``:
    ``(dim, start, stop)`` of the elements they keep (None for a slice with a step other than 1);
    reshapes: ``()`` (undone by a reshape to the base's shape). None too when an argument is a graph value.
    """
    name = op.name
    values = tuple(rest) + tuple(kwargs.values())
    if any(isinstance(a, ember.fx.Node) for a in values):
        return None
    ndim = len(shape)
    if name in ("view", "reshape"):
        return None if any(isinstance(a, ember.dtype) for a in values) else ()
    if name in ("unsqueeze", "squeeze", "flatten", "unflatten"):
        return ()
    if name == "transpose":
        return tuple(rest) if not kwargs and len(rest) == 2 else None
    if name == "permute":
        dims = rest[0] if len(rest) == 1 and isinstance(rest[0], (list, tuple)) else rest
        return tuple(_norm_dim(d, ndim) for d in dims) if not kwargs else None
    if name == "select":
        if kwargs or len(rest) != 2:
            return None
        dim = _norm_dim(rest[0], ndim)
        index = rest[1] + shape[dim] if rest[1] < 0 else rest[1]
        return dim, index, index + 1
    if name == "slice":
        bound = dict(zip(("dim", "start", "end", "step"), rest))
        bound.update(kwargs)
        if bound.get("step", 1) != 1:
            return None
        dim = _norm_dim(bound.get("dim", 0), ndim)
        start, stop, _ = slice(bound.get("start"), bound.get("end")).indices(shape[dim])
        return dim, start, max(start, stop)
    return None


class _Root:
    """One storage: its current value (a graph node) and how many times it was written."""

    __slots__ = ("value", "version", "input_index", "constant")

    def __init__(self, value, input_index=None, constant=False):
        self.value = value
        self.version = 0
        self.input_index = input_index
        self.constant = constant


class _Alias:
    """What a tensor is: a storage seen through a view chain, and its node at a version of the storage.

    A chain step is ``(op, rest_args, kwargs, index)``: ``op(value, *rest_args, **kwargs)``,
    then ``[index]`` for views returning several tensors (``split``).
    """

    __slots__ = ("root", "chain", "node", "version")

    def __init__(self, root, chain, node, version):
        self.root = root
        self.chain = chain
        self.node = node
        self.version = version


#: The device of the real inputs of the trace running now (:func:`traced_device`).
_traced_device = contextvars.ContextVar("ember_aot_traced_device", default=None)


def traced_device():
    """The device the graph being traced will run on (its tensors are ``meta`` during the trace): what a
    decomposition reads when the best formula depends on the device. ``cpu`` outside a trace."""
    return _traced_device.get() or ember.device("cpu")


def _is_device(a):
    return isinstance(a, ember.device) or (isinstance(a, str) and a.split(":")[0] == "meta")


def _device_type(a):
    return a.type if isinstance(a, ember.device) else a.split(":")[0]


class FunctionalTracer(DispatchMode):
    """A dispatch mode that records a functional graph of the ops run on meta tensors.

    Args:
        graph (ember.fx.Graph): where nodes go; every node gets ``meta["val"]``.
        root (ember.nn.Module): holds tensor constants the traced function uses.
        decompositions (dict[Op, callable] or None): ops replaced by a Python function
            whose own op calls are recorded (like ``make_fx``'s ``decomposition_table``).
        device (ember.device or None): the device of the real inputs; ``meta`` devices
            in recorded arguments become it (default ``cpu``).
        fn_name (str): the traced function's name, for error messages.
    """

    def __init__(self, graph, root, decompositions=None, device=None, fn_name="<function>"):
        self.graph = graph
        self.root = root
        self.decompositions = dict(decompositions or {})
        self.device = ember.device(device) if device is not None else ember.device("cpu")
        self.fn_name = fn_name
        self.inputs = []  # _Root per graph input, in order
        self._by_id = {}  # id(tensor) -> (tensor, _Alias); the tensor is kept so the id stays unique
        self._by_data = {}  # id(backend array) -> (array, _Alias): autograd's aliases of saved outputs
        self._constants = {}  # id(real tensor) -> (real tensor, meta copy)
        self._n_constants = 0
        self._meta_data = {}  # id(MetaArray) -> (MetaArray, numpy data) of meta tensors built from data

    @contextlib.contextmanager
    def capturing(self):
        """While tracing: remember the data of tensors built on ``meta`` from numpy arrays."""
        from ember._device import get_backend

        backend = get_backend("meta")
        outer = backend.__dict__.get("from_numpy")  # a trace running inside another one (rare)
        original = backend.from_numpy
        made = self._meta_data

        def from_numpy(array, index):
            result = original(array, index)
            made[id(result)] = (result, np.array(array, copy=True))
            return result

        backend.from_numpy = from_numpy  # an instance attribute over the class's method
        token = _traced_device.set(self.device)
        try:
            yield self
        finally:
            _traced_device.reset(token)
            if outer is None:
                del backend.from_numpy
            else:
                backend.from_numpy = outer

    # ------------------------------------------------------------------ values

    def add_input(self, tensor, node):
        """Make ``tensor`` (a meta tensor) the graph input ``node``."""
        node.meta["val"] = meta_copy(tensor)
        root = _Root(node, input_index=len(self.inputs))
        self.inputs.append(root)
        self._remember(tensor, _Alias(root, (), node, 0))

    def _remember(self, tensor, alias):
        self._by_id[id(tensor)] = (tensor, alias)
        self._by_data[id(tensor._data)] = (tensor._data, alias)

    def _lookup(self, tensor):
        entry = self._by_id.get(id(tensor))
        if entry is not None and entry[0] is tensor:
            return entry[1]
        entry = self._by_data.get(id(tensor._data))
        if entry is not None and entry[0] is tensor._data:
            return entry[1]
        return None

    def alias_of(self, tensor):
        """The :class:`_Alias` of a tensor; an untracked non-meta tensor becomes a constant."""
        alias = self._lookup(tensor)
        if alias is not None:
            return alias
        if tensor.device.type == "meta":
            entry = self._meta_data.get(id(tensor._data))
            if entry is not None and entry[0] is tensor._data:  # built from data during the trace
                real = ember.from_numpy(entry[1]).to(self.device)
                alias = self._constant(real)
                self._remember(tensor, alias)
                return alias
            raise InductorError(
                f"aot: while tracing {self.fn_name}, a meta tensor of shape {tuple(tensor.shape)} appeared that "
                "no traced op produced (a meta tensor created outside the function?); its value is unknown"
            )
        alias = self._constant(tensor)
        self._remember(tensor, alias)
        return alias

    def _constant(self, tensor):
        """A ``get_attr`` node holding the real tensor ``tensor``; its alias."""
        name = f"_tensor_constant{self._n_constants}"
        self._n_constants += 1
        setattr(self.root, name, tensor)
        node = self.graph.get_attr(name)
        node.meta["val"] = meta_copy(tensor)
        return _Alias(_Root(node, constant=True), (), node, 0)

    def node_of(self, tensor):
        """The graph node holding ``tensor``'s current value (rebuilding a view whose storage was written)."""
        alias = self.alias_of(tensor)
        root = alias.root
        if not alias.chain:
            return root.value
        if alias.version != root.version:
            alias.node = self._replay(root.value, alias.chain)
            alias.version = root.version
        return alias.node

    def input_alias(self, tensor):
        """``(input_index, chain)`` when ``tensor`` is a view of (or is) a graph input, else None."""
        alias = self._lookup(tensor)
        if alias is None or alias.root.input_index is None:
            return None
        return alias.root.input_index, alias.chain

    def _meta_arg(self, a):
        """The value to run an op with during the trace: real tensors become their meta copies."""
        if isinstance(a, ember.Tensor):
            if a.device.type == "meta":
                return a
            entry = self._constants.get(id(a))
            if entry is None:
                self.alias_of(a)  # record the constant
                entry = self._constants[id(a)] = (a, meta_copy(a))
                self._remember(entry[1], self.alias_of(a))
            return entry[1]
        if isinstance(a, (list, tuple)) and not hasattr(a, "_fields"):
            return type(a)(self._meta_arg(v) for v in a)
        return a

    def _graph_arg(self, a):
        """The graph argument for a call argument: tensors become nodes, ``meta`` devices the real one."""
        if isinstance(a, ember.Tensor):
            return self.node_of(a)
        if isinstance(a, (list, tuple)) and not hasattr(a, "_fields"):
            return type(a)(self._graph_arg(v) for v in a)
        if _is_device(a) and _device_type(a) == "meta":
            return self.device
        return a

    # ------------------------------------------------------------------ emitting functional nodes

    def _emit(self, op, args, kwargs=None):
        """Append ``op(*args, **kwargs)`` (args may hold nodes) with its meta value; return the node."""
        kwargs = kwargs or {}

        def val(a):
            if isinstance(a, ember.fx.Node):
                return a.meta["val"]
            if isinstance(a, (list, tuple)) and not hasattr(a, "_fields"):
                return type(a)(val(v) for v in a)
            if _is_device(a):
                return ember.device("meta")
            return a

        with ember.no_grad():
            result = op(*val(args), **{k: val(v) for k, v in kwargs.items()})
        node = self.graph.call_function(op, tuple(args), dict(kwargs))
        node.meta["val"] = meta_copy(result)
        return node

    def _getitem(self, node, index):
        item = self.graph.call_function(operator.getitem, (node, index))
        item.meta["val"] = node.meta["val"][index]
        return item

    def _replay(self, node, chain):
        """Apply a view chain to ``node``'s value (``view`` as ``reshape``: the value's strides may differ)."""
        for op, rest, kwargs, index in chain:
            if op is registry["view"] and not any(isinstance(a, ember.dtype) for a in rest):
                op = registry["reshape"]
            node = self._emit(op, (node, *rest), kwargs)
            if index is not None:
                node = self._getitem(node, index)
        return node

    def _cast_to(self, node, like):
        """``node``'s value converted to ``like``'s dtype and broadcast to its shape (what ``copy_`` writes)."""
        val = node.meta["val"]
        if val.dtype != like.dtype:
            node = self._emit(registry["_to_copy"], (node,), {"dtype": like.dtype})
        if tuple(val.shape) != tuple(like.shape):
            node = self._emit(registry["expand"], (node, tuple(like.shape)))
        return node

    def _scatter(self, base, chain, value):
        """The value of storage ``base`` after writing ``value`` into the view ``chain`` of it."""
        structured = self._scatter_views(base, chain, value)
        if structured is not None:
            return structured
        return self._scatter_by_index(base, chain, value)

    def _scatter_views(self, base, chain, value):
        """The scatter as pointwise ops (pads, wheres, inverse views), or None for a chain it can't invert.

        A select or unit-step slice of a written view is undone by padding the value back to the base's
        size along that dim (a ``where`` keeps the base's other elements, unless the base is zeros, as
        autograd's select/slice backward makes it); reshapes and permutations are undone by their
        inverse. The compiler fuses all of it into the consumer's loop, where the index scatter would be
        an eager ``index_put`` over an ``arange`` of the whole storage.
        """
        if not chain:
            return value
        op, rest, kwargs, index = chain[0]
        if index is not None or op.name not in _INVERTIBLE_VIEWS:
            return None
        base_shape = tuple(base.meta["val"].shape)
        args = _view_args(op, rest, kwargs, base_shape)
        if args is None:
            return None
        view_op = registry["reshape"] if op.name == "view" else op
        sub_base = self._emit(view_op, (base, *rest), kwargs)
        inner = self._scatter_views(sub_base, chain[1:], value)
        if inner is None:
            return None
        if op.name in ("view", "reshape", "unsqueeze", "squeeze", "flatten", "unflatten"):
            return self._emit(registry["reshape"], (inner, base_shape))
        if op.name == "transpose":
            return self._emit(registry["transpose"], (inner, *args))
        if op.name == "permute":
            inverse = [0] * len(args)
            for i, d in enumerate(args):
                inverse[d] = i
            return self._emit(registry["permute"], (inner, *inverse))
        dim, start, stop = args
        if op.name == "select":
            inner = self._emit(registry["unsqueeze"], (inner, dim))
        ndim = len(base_shape)
        pads = [0, 0] * (ndim - 1 - dim) + [start, base_shape[dim] - stop]
        padded = self._emit(registry["pad"], (inner, pads))
        if _is_zeros(base):
            return padded
        positions = self._emit(registry["arange"], (base_shape[dim],), {"dtype": ember.int64, "device": self.device})
        inside = self._emit(
            registry["logical_and"],
            (self._emit(registry["ge"], (positions, start)), self._emit(registry["lt"], (positions, stop))),
        )
        inside = self._emit(registry["reshape"], (inside, (base_shape[dim],) + (1,) * (ndim - 1 - dim)))
        return self._emit(registry["where"], (inside, padded, base))

    def _scatter_by_index(self, base, chain, value):
        """The general scatter: the storage's element positions pushed through the chain, then ``index_put``."""
        base_val = base.meta["val"]
        shape = tuple(base_val.shape)
        positions = self._emit(registry["arange"], (base_val.numel(),), {"dtype": ember.int64, "device": self.device})
        positions = self._emit(registry["reshape"], (positions, shape))
        positions = self._replay(positions, chain)
        flat_positions = self._emit(registry["reshape"], (positions, (-1,)))
        flat_value = self._emit(registry["reshape"], (value, (-1,)))
        flat = self._emit(registry["reshape"], (base, (-1,)))
        written = self._emit(registry["index_put"], (flat, (flat_positions,), flat_value))
        return self._emit(registry["reshape"], (written, shape))

    def _write(self, tensor, value):
        """Make ``value`` (a node, already of ``tensor``'s dtype and shape) the new contents of ``tensor``."""
        alias = self.alias_of(tensor)
        root = alias.root
        if root.constant:
            raise InductorError(
                f"aot: {self.fn_name} writes in place into a tensor it does not take as an input (a global or "
                "closed-over tensor); pass the tensor as an argument so the write can be returned"
            )
        root.value = self._scatter(root.value, alias.chain, value) if alias.chain else value
        root.version += 1
        alias.node = value
        alias.version = root.version

    # ------------------------------------------------------------------ dispatch

    def __ember_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flag = _inplace_flag_set(func, args, kwargs)
        if flag is not None:
            return self._flagged_inplace(func, flag, args, kwargs)
        if func.kind == "inplace" and func.functional is not None and _records_grad(args, kwargs):
            return self._inplace_under_autograd(func, args, kwargs)
        decomposition = self._decomposition_for(func, args, kwargs)
        if decomposition is not None:
            meta_args, meta_kwargs = self._meta_arg(tuple(args)), {k: self._meta_arg(v) for k, v in kwargs.items()}
            if not self._optional(func, decomposition):
                with self:
                    return decomposition(*meta_args, **meta_kwargs)
            try:
                with self:
                    return decomposition(*meta_args, **meta_kwargs)
            except (RuntimeError, TypeError) as exc:
                if not reads_values(exc):
                    raise
                # the decomposition needs values (linalg.solve's singularity check): keep the op whole,
                # an extern call (what it recorded before failing is unused, and dead code later)
        if func.kind == "inplace":
            return self._mutate(func, args, kwargs)
        return self._record(func, args, kwargs)

    def _optional(self, func, decomposition):
        """Whether ``decomposition`` only comes from the table (the op itself can be recorded instead)."""
        return self.decompositions.get(func) is decomposition and func.kind == "function"

    def _decomposition_for(self, func, args, kwargs):
        table = self.decompositions.get(func)
        if table is not None:
            return table
        if func.decomposition is None:
            return None
        if func.kind == "inplace":  # functional op + copy_
            return func.decomposition
        if _mutates_arguments(func, args, kwargs) or _autograd_decomposes(func, args, kwargs):
            return func.decomposition
        return None

    def _inplace_under_autograd(self, func, args, kwargs):
        """``x.op_(...)`` while autograd records (the joint trace): ``op(clone(x), ...)``, then ``copy_``
        into ``x``, as eager autograd records it (``ember.autograd._inplace``). Without the clone, the
        functional op's node would save ``x`` itself, which the copy overwrites: its backward then
        finds a newer version of ``x`` than it saved (``y = x * 1; y.pow_(2)``)."""
        position = getattr(func, "self_index", 0)  # where self goes among the functional's arguments
        target = args[0]
        with self:
            source = registry["clone"](target)
            out = func.functional(*args[1 : 1 + position], source, *args[1 + position :], **kwargs)
            return registry["copy_"](target, out)

    def _fresh_bernoulli(self, func, args, kwargs):
        """``x.bernoulli_(p)`` with a number ``p`` (stochastic depth's ``empty(...).bernoulli_(p)``):
        the functional ``bernoulli(x, p)``, written into ``x``. Both draw one uniform per element in
        order and compare it with ``p``, so the numbers are eager mode's on the CPU (see
        :mod:`ember._inductor.aot.rng` for cuda)."""
        target = args[0]
        p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
        extra = {"generator": kwargs["generator"]} if kwargs.get("generator") is not None else {}
        value = self._emit(registry["bernoulli"], (self.node_of(target), p), self._graph_arg(extra))
        result = func(*self._meta_arg(tuple(args)), **{k: self._meta_arg(v) for k, v in kwargs.items()})
        self._write(target, value)
        return result

    def _flagged_inplace(self, func, flag, args, kwargs):
        """``op(x, ..., inplace=True)``: the functional call, then ``copy_`` into ``x``. While autograd
        records, the call runs on a clone of ``x`` (see :meth:`_inplace_under_autograd`): an op whose
        gradient reads its input (``leaky_relu``, ``hardswish``) must not see ``x`` overwritten."""
        args, kwargs = list(args), dict(kwargs)
        if flag < len(args):
            args[flag] = False
        else:
            kwargs["inplace"] = False
        target = args[0]
        with self:
            if _records_grad(args, kwargs):
                args[0] = registry["clone"](target)
            result = func(*args, **kwargs)
            return registry["copy_"](target, result)

    def _record(self, func, args, kwargs):
        """Run a non-mutating op on meta tensors and append its node."""
        real_args = self._meta_arg(tuple(args))
        real_kwargs = {k: self._meta_arg(v) for k, v in kwargs.items()}
        if "device" in real_kwargs and (real_kwargs["device"] is not None or not _has_tensor(real_args)):
            # a factory (or a move): made on meta during the trace, recorded with the device it names
            real_kwargs["device"] = "meta"
        result = func(*real_args, **real_kwargs)
        if not _has_tensor(result):
            return result  # metadata (sizes, flags): a constant of the trace
        node = self.graph.call_function(
            func, self._graph_arg(tuple(args)), {k: self._graph_arg(v) for k, v in kwargs.items()}
        )
        node.meta["val"] = meta_copy(result)
        if isinstance(result, ember.Tensor):
            self._track(func, args, kwargs, result, node, None)
        else:
            for i, item in enumerate(result):
                if isinstance(item, ember.Tensor):
                    self._track(func, args, kwargs, item, self._getitem(node, i), i)
        if is_random_op(func):
            node.meta["random"] = True
        return result

    def _track(self, func, args, kwargs, tensor, node, index):
        if self._lookup(tensor) is not None:
            return  # the op returned a value it was given (or an alias of one): same storage, same value
        if func.kind == "view" and args and isinstance(args[0], ember.Tensor):
            base = self.alias_of(args[0])
            rest = self._graph_arg(tuple(args[1:]))
            step = (func, rest, {k: self._graph_arg(v) for k, v in kwargs.items()}, index)
            alias = _Alias(base.root, base.chain + (step,), node, base.root.version)
        else:
            alias = _Alias(_Root(node), (), node, 0)
        self._remember(tensor, alias)

    def _mutate(self, func, args, kwargs):
        """An in-place prim: run it on meta (for autograd), record its functional counterpart."""
        name = func.name
        if name == "bernoulli_" and _number_probability(args, kwargs):
            return self._fresh_bernoulli(func, args, kwargs)
        if name not in _MUTATING_PRIMS:
            if is_random_op(func):
                raise InductorError(
                    f"aot: {self.fn_name} calls the in-place random op {name}, which the compiler does not "
                    "support; use the functional op (ember.rand, ember.randn, ember.bernoulli, ...)"
                )
            raise InductorError(f"aot: {self.fn_name} calls the in-place op {name}, which has no functional form")
        target = args[0]
        current = self.node_of(target)
        if name == "copy_":
            value = self._cast_to(self.node_of(args[1]), target)
        elif name == "fill_":
            fill = args[1]
            if isinstance(fill, ember.Tensor):
                value = self._cast_to(self.node_of(fill), target)
            else:
                value = self._emit(registry["full_like"], (current, fill))
        elif name == "zero_":
            value = self._emit(registry["zeros_like"], (current,))
        else:  # index_put_
            rest = self._graph_arg(tuple(args[1:]))
            value = self._emit(registry["index_put"], (current, *rest), self._graph_arg(kwargs))
        result = func(*self._meta_arg(tuple(args)), **{k: self._meta_arg(v) for k, v in kwargs.items()})
        self._write(target, value)
        return result


def _number_probability(args, kwargs):
    """Whether a ``bernoulli_`` call draws with one probability given as a Python number."""
    p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
    return isinstance(p, (int, float)) and not isinstance(p, bool)


def reads_values(exc):
    """Whether an error raised on meta tensors says the code needed tensor values."""
    text = str(exc)
    if isinstance(exc, TypeError):
        return "MetaArray" in text
    return "meta tensor" in text or "data-dependent" in text


def _has_tensor(value):
    if isinstance(value, ember.Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_tensor(v) for v in value)
    return False


def _records_grad(args, kwargs):
    """Whether autograd records a call with these arguments (grad mode on, a tensor requiring grad)."""
    if not ember.is_grad_enabled():
        return False
    flat, _ = tree_flatten((args, kwargs))
    return any(isinstance(a, ember.Tensor) and a.requires_grad for a in flat)


def _inplace_flag_set(func, args, kwargs):
    """The position of ``func``'s ``inplace`` argument when the call sets it to True, else None."""
    from ember.autograd._record import _inplace_flag

    flag = _inplace_flag(func)
    if flag is None:
        return None
    value = args[flag] if flag < len(args) else kwargs.get("inplace", False)
    return flag if value is True else None


def _argument(func, args, kwargs, name):
    """The value of the parameter ``name`` in a normalised call (positional or keyword, else its default)."""
    params = list(func.signature.parameters.values())
    for i, p in enumerate(params):
        if p.name == name:
            if i < len(args):
                return args[i]
            return kwargs.get(name, p.default)
    return None


# functions that update some of their arguments (running statistics) as a side effect:
# op name -> (the flag that must be true, the argument that is written)
_SIDE_EFFECTS = {
    "batch_norm": ("training", "running_mean"),
    "instance_norm": ("use_input_stats", "running_mean"),
}


def _mutates_arguments(func, args, kwargs):
    spec = _SIDE_EFFECTS.get(func.name)
    if spec is None:
        return False
    flag, written = spec
    return bool(_argument(func, args, kwargs, flag)) and _argument(func, args, kwargs, written) is not None


def _autograd_decomposes(func, args, kwargs):
    """Whether autograd would record ``func``'s decomposition for this call (not a formula)."""
    from ember._ops._dispatch import state
    from ember.autograd._table import DERIVATIVES, NONDIFFERENTIABLE

    if not state.grad_enabled or not _requires_grad(args) and not _requires_grad(tuple(kwargs.values())):
        return False
    entry = DERIVATIVES.get(func)
    if entry is not None:
        return entry.decompose_if is not None and entry.decomposes(args, kwargs)
    return func not in NONDIFFERENTIABLE


def _requires_grad(values):
    for v in values:
        if isinstance(v, ember.Tensor) and v.requires_grad:
            return True
        if isinstance(v, (list, tuple)) and _requires_grad(v):
            return True
    return False
