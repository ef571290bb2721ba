"""The derivative table: how to differentiate each op of the registry.

Every op of :mod:`ember._ops` that autograd can meet falls in one of three
groups, and this module keeps one table per group:

* :data:`DERIVATIVES`: ops with backward formulas. A formula is a Python
  function whose **parameter names say what it needs**: the gradient of the
  output (``grad``; ``grads`` for all outputs of a multi-output op), the
  op's arguments by their registry names (``input``, ``other``, ``dim``,
  ...), the output (``result``; ``results`` for all of them) and, for joint
  formulas, ``output_mask`` (which of the inputs need a gradient). Autograd
  saves exactly those values at forward time, so an in-place change to a
  tensor that no formula reads is not an error, as in PyTorch's
  ``derivatives.yaml``. A formula that needs only an argument's shape, strides
  or dtype reads ``<argument>_meta`` (``input_meta``), which saves a
  :class:`~ember.autograd.graph.TensorMeta`, not the tensor.
  Formulas are written in ember ops, so the gradients
  they compute are themselves differentiable (``create_graph=True``).
* :data:`THROUGH_DECOMPOSITION`: composite ops whose gradient comes from
  recording their decomposition (see :func:`through_decomposition`).
* :data:`NONDIFFERENTIABLE`: ops whose outputs never require grad
  (comparisons, indices, integer results).

A formula returns the gradient for its input as the **conjugate Wirtinger
derivative** convention of PyTorch: for a holomorphic ``f`` the gradient of
``input`` is ``grad * conj(f'(input))``. The engine sums gradients over
broadcast dimensions and casts them back to the input's dtype (taking the
real part for real inputs), so formulas need not.

Example::

    derivative("mul",
               input=lambda grad, other: grad * conj(other),
               other=lambda grad, input: grad * conj(input))
"""

from __future__ import annotations

import inspect
import operator
import types

from ember._ops import registry

__all__ = [
    "Derivative",
    "DERIVATIVES",
    "THROUGH_DECOMPOSITION",
    "NONDIFFERENTIABLE",
    "derivative",
    "through_decomposition",
    "nondifferentiable",
    "lookup",
]

KEYWORD_ONLY = -1
VAR_POSITIONAL = -2

#: Names a formula may take besides the op's arguments.
SPECIAL_PARAMETERS = frozenset({"grad", "grads", "result", "results", "output_mask"})


class Formula:
    """One backward formula: the gradient of one input, or of several inputs jointly.

    Attributes:
        inputs (tuple[str]): the argument names it returns gradients for.
        fn (callable): the formula.
        params (tuple[str]): its parameter names (what it reads).
        joint (bool): whether it returns a tuple, one gradient per name in ``inputs``.
    """

    __slots__ = ("inputs", "fn", "params", "joint", "call")

    def __init__(self, inputs, fn):
        self.inputs = inputs
        self.fn = fn
        self.params = _parameter_names(fn)
        self.joint = len(inputs) > 1
        self.call = self._caller()

    def _caller(self):
        """``call(env)``: the formula applied to the values it names (looked up once per call)."""
        fn, params = self.fn, self.params
        if len(params) == 1:
            (name,) = params
            return lambda env: fn(env[name])
        if len(params) == 2:
            first, second = params
            return lambda env: fn(env[first], env[second])
        getter = operator.itemgetter(*params) if params else (lambda env: ())
        return lambda env: fn(*getter(env))


def _simple_call(formula):
    """``(fn, first, second)`` of a formula for FormulaNode's inlined call (see Derivative.simple_steps)."""
    params = formula.params
    if len(params) == 1:
        return formula.fn, params[0], None
    if len(params) == 2:
        return formula.fn, params[0], params[1]
    return formula.call, None, None


# The table's ~300 formulas and ~240 ops are read at ``import ember``: their signatures come from
# the functions' code objects, about 30 times faster than inspect.signature, which only functions
# whose signature the code object doesn't tell (__signature__, functools.wraps, partials) go through.


def _plain_function(fn):
    return type(fn) is types.FunctionType and not hasattr(fn, "__signature__") and not hasattr(fn, "__wrapped__")


def _parameter_names(fn):
    """The names of ``fn``'s parameters, in order: ``tuple(inspect.signature(fn).parameters)``."""
    if not _plain_function(fn):
        return tuple(inspect.signature(fn).parameters)
    code = fn.__code__
    positional, keyword_only = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames  # positional, keyword-only, then *args and **kwargs when present
    star = (names[positional + keyword_only],) if code.co_flags & inspect.CO_VARARGS else ()
    double_star = (
        (names[positional + keyword_only + len(star)],) if code.co_flags & inspect.CO_VARKEYWORDS else ()
    )
    return names[:positional] + star + names[positional : positional + keyword_only] + double_star


def _signature_parts(fn):
    """``(names, positional, var_positional, defaults)`` of ``fn``'s signature, as inspect.signature has them.

    ``names``: every parameter, in order; ``positional``: the positional(-or-keyword) ones; ``var_positional``:
    the ``*args`` name or None; ``defaults``: ``{name: default}`` in parameter order.
    """
    if not _plain_function(fn):
        parameters = inspect.signature(fn).parameters.items()
        positional_kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        return (
            tuple(n for n, _ in parameters),
            tuple(n for n, p in parameters if p.kind in positional_kinds),
            next((n for n, p in parameters if p.kind is p.VAR_POSITIONAL), None),
            {n: p.default for n, p in parameters if p.default is not p.empty},
        )
    code = fn.__code__
    names = _parameter_names(fn)
    positional = names[: code.co_argcount]
    star = names[code.co_argcount] if code.co_flags & inspect.CO_VARARGS else None  # *args follows them
    given = dict(zip(positional[len(positional) - len(fn.__defaults__ or ()) :], fn.__defaults__ or ()))
    given.update(fn.__kwdefaults__ or {})
    return names, positional, star, {n: given[n] for n in names if n in given}


class Derivative:
    """The backward formulas of one op (an entry of :data:`DERIVATIVES`).

    Attributes:
        op: the registry op.
        formulas (tuple[Formula]): one per differentiable input (or group of inputs).
        grad_args (tuple[str]): the differentiable arguments, in signature order.
        saved_args (tuple[str]): the arguments the formulas read (saved at forward time).
        meta_args (tuple[str]): arguments of which the formulas read only the metadata
            (parameter ``<name>_meta``): a :class:`~ember.autograd.graph.TensorMeta` is saved,
            not the tensor, so no memory is kept alive and an in-place change later is no error.
        saves_result (bool): whether the formulas read the output(s).
        nondiff_args (frozenset[str]): tensor arguments with no gradient (masks, indices).
        node_name (str): the backward node's name (``MulBackward0``).
        params (tuple[str]): positional parameter names of the op, for binding calls.
        var_positional (str or None): the ``*args`` parameter name, if the op has one.
        defaults (dict): default values of the op's parameters.
    """

    __slots__ = (
        "op",
        "formulas",
        "grad_args",
        "saved_args",
        "meta_args",
        "saves_result",
        "nondiff_args",
        "node_name",
        "params",
        "var_positional",
        "defaults",
        "reads_original_input",
        "grad_specs",
        "saved_specs",
        "saved_by",
        "result_by",
        "reads_grads",
        "static_layout",
        "decompose_if",
        "node_class",
        "fast_record",
        "save_plan",
        "simple_steps",
        "reads_results",
        "_decompose_specs",
    )

    def __init__(self, op, formulas, nondiff_args=(), decompose_if=None):
        self.op = op
        self.formulas = tuple(formulas)
        names, self.params, self.var_positional, self.defaults = _signature_parts(op.meta)  # op._call_signature's
        names = list(names)
        graded = {name for f in self.formulas for name in f.inputs}
        self.grad_args = tuple(n for n in names if n in graded)
        unknown = graded.difference(names)
        if unknown:
            raise ValueError(
                f"derivative of {op.name}: {sorted(unknown)} are not arguments of {op.name}{op._call_signature}"
            )
        read = set()
        for f in self.formulas:
            bad = [
                p
                for p in f.params
                if p not in SPECIAL_PARAMETERS and p not in names and _meta_of(p, names) is None
            ]
            if bad:
                raise ValueError(
                    f"derivative of {op.name}: formula for {f.inputs} reads {bad}, which are neither arguments "
                    f"of {op.name}{op._call_signature} nor one of {sorted(SPECIAL_PARAMETERS)}"
                )
            read.update(f.params)
        self.saved_args = tuple(n for n in names if n in read)
        self.meta_args = tuple(n for n in names if n + META_SUFFIX in read and n + META_SUFFIX not in names)
        self.saves_result = "result" in read or "results" in read
        self.nondiff_args = frozenset(nondiff_args)
        first = names[0] if names else None
        self.reads_original_input = first in read
        self.node_name = _node_name(op.name)
        self.node_class = None  # the FormulaNode subclass named node_name (made on first use)
        self.fast_record = False  # ember.autograd._record's recorder of common calls: False until built, None if none
        self.save_plan = None  # ember.autograd._record's plan of the values to save (made on first use)
        position = {n: i for i, n in enumerate(self.params)}
        if self.var_positional is not None:
            position[self.var_positional] = VAR_POSITIONAL
        # (name, index among positional parameters, or KEYWORD_ONLY, or VAR_POSITIONAL for *args)
        self.grad_specs = tuple((n, position.get(n, KEYWORD_ONLY)) for n in self.grad_args)
        # (key in the formulas' environment, argument name, position, whether only its metadata is kept)
        self.saved_specs = tuple((n, n, position.get(n, KEYWORD_ONLY), False) for n in self.saved_args) + tuple(
            (n + META_SUFFIX, n, position.get(n, KEYWORD_ONLY), True) for n in self.meta_args
        )
        # which differentiable arguments (indices into grad_args) need each saved value, and the outputs:
        # a value is saved only when a formula that reads it will run (PyTorch's should_compute_output)
        index = {n: i for i, n in enumerate(self.grad_args)}
        readers = {}
        for f in self.formulas:
            for p in f.params:
                readers.setdefault(p, set()).update(index[n] for n in f.inputs)
        # as bit masks over grad_args (bit i: argument i), tested against the mask of arguments needing a gradient
        self.saved_by = tuple(_bits(readers.get(key, ())) for key, *_ in self.saved_specs)
        self.result_by = _bits(readers.get("result", set()) | readers.get("results", set()))
        # one edge per differentiable argument, when none of them is a list of tensors
        self.static_layout = {n: (i, -1) for i, n in enumerate(self.grad_args)}
        self.reads_grads = "grads" in read
        self.reads_results = "results" in read
        # FormulaNode.apply's plan for the common entry (one formula per tensor argument, reading one output
        # gradient): per formula (edge index, fn, first, second): the formula and its one or two parameter
        # names, which apply looks up itself (a frame less than Formula.call), or (edge index, Formula.call,
        # None, None) for other parameter counts; None otherwise
        self.simple_steps = (
            tuple((self.static_layout[f.inputs[0]][0], *_simple_call(f)) for f in self.formulas)
            if not self.reads_grads and not any(f.joint for f in self.formulas)
            else None
        )
        # decompose_if(the arguments it names) true: that call records the decomposition instead
        self.decompose_if = decompose_if
        self._decompose_specs = ()
        if decompose_if is not None:
            wanted = tuple(inspect.signature(decompose_if).parameters)
            bad = [n for n in wanted if n not in names]
            if bad:
                raise ValueError(f"derivative of {op.name}: decompose_if reads {bad}, which are not arguments of it")
            self._decompose_specs = tuple((n, position.get(n, KEYWORD_ONLY)) for n in wanted)

    def decomposes(self, args, kwargs):
        """Whether this call goes through the decomposition (``decompose_if`` of its arguments)."""
        return bool(self.decompose_if(*[self.value(n, p, args, kwargs) for n, p in self._decompose_specs]))

    def value(self, name, position, args, kwargs):
        """The value of argument ``name`` in a call (a fast path of :meth:`bind` for one argument)."""
        if position == VAR_POSITIONAL:
            return tuple(args[len(self.params) :])
        if 0 <= position < len(args):
            return args[position]
        if kwargs and name in kwargs:
            return kwargs[name]
        return self.defaults.get(name)

    def bind(self, args, kwargs):
        """The call's arguments by parameter name, defaults filled in (a fast ``Signature.bind``)."""
        bound = dict(self.defaults)
        params = self.params
        if len(args) > len(params):
            if self.var_positional is None:
                raise TypeError(f"{self.op.name}() takes {len(params)} positional arguments but {len(args)} were given")
            bound.update(zip(params, args))
            bound[self.var_positional] = tuple(args[len(params) :])
        else:
            bound.update(zip(params, args))
            if self.var_positional is not None:
                bound.setdefault(self.var_positional, ())
        if kwargs:
            bound.update(kwargs)
        return bound

    def __repr__(self):
        return f"<Derivative of {self.op.name}: {', '.join(self.grad_args)}>"


#: A formula parameter ``<argument> + META_SUFFIX`` (``input_meta``) reads only the argument's metadata.
META_SUFFIX = "_meta"


def _meta_of(param, names):
    """The argument whose metadata ``param`` reads, or None."""
    if param.endswith(META_SUFFIX) and param[: -len(META_SUFFIX)] in names:
        return param[: -len(META_SUFFIX)]
    return None


def _bits(indices):
    mask = 0
    for i in indices:
        mask |= 1 << i
    return mask


def _node_name(op_name):
    """``add`` -> ``AddBackward0``, ``max_pool2d`` -> ``MaxPool2DBackward0``, as PyTorch names its nodes."""
    parts = op_name.strip("_").split("_")
    camel = "".join(p[:1].upper() + p[1:] for p in parts)
    camel = camel.replace("1d", "1D").replace("2d", "2D").replace("3d", "3D")
    return f"{camel}Backward0"


#: Op -> Derivative.
DERIVATIVES: dict = {}
#: Ops differentiated by recording their decomposition.
THROUGH_DECOMPOSITION: set = set()
#: Ops whose outputs never require grad.
NONDIFFERENTIABLE: set = set()


def _op(name):
    try:
        return registry[name]
    except KeyError:
        raise KeyError(f"the derivative table names {name!r}, which is not an op of the ember registry") from None


def derivative(name, joint=None, *, nondiff=(), decompose_if=None, **formulas):
    """Register the backward formulas of op ``name``.

    Args:
        name (str): the registry op.
        joint (dict, optional): ``{("input", "weight", "bias"): fn}``: one formula returning
            a tuple of gradients for several inputs (it may read ``output_mask``).
        nondiff (tuple[str]): tensor arguments that get no gradient (indices, masks).
        decompose_if (callable, optional): a function of some of the op's arguments (by name); calls
            for which it is true record the op's decomposition instead (a random mask the kernel
            does not return: ``scaled_dot_product_attention`` with ``dropout_p > 0``).
        **formulas: ``input_name=fn``: the gradient of one input. An argument that
            is a list of tensors (``cat``'s ``tensors``) gets a list of gradients.

    Raises:
        RuntimeError: if the op already has an entry in any table.
        ValueError: if a formula names something that is not an argument of the op.
    """
    op = _op(name)
    _check_new(op)
    entries = [Formula((arg,), fn) for arg, fn in formulas.items()]
    for inputs, fn in (joint or {}).items():
        entries.append(Formula(tuple(inputs), fn))
    entry = Derivative(op, entries, nondiff, decompose_if)
    DERIVATIVES[op] = entry
    return entry


def through_decomposition(*names):
    """Differentiate these composite ops by recording their decomposition.

    Use it where the decomposition's own backward is as fast as a hand-written
    formula would be (it is then one thing less to keep right).

    Raises:
        ValueError: if an op is not a composite.
    """
    for name in names:
        op = _op(name)
        _check_new(op)
        if op.decomposition is None:
            raise ValueError(f"{name} has no decomposition to differentiate through")
        THROUGH_DECOMPOSITION.add(op)


def nondifferentiable(*names):
    """Mark ops whose outputs never require grad (comparisons, indices, counts)."""
    for name in names:
        op = _op(name)
        _check_new(op)
        NONDIFFERENTIABLE.add(op)


def _check_new(op):
    if op in DERIVATIVES or op in THROUGH_DECOMPOSITION or op in NONDIFFERENTIABLE:
        raise RuntimeError(f"op {op.name} already has an entry in the derivative table")


def lookup(op):
    """``("formula", Derivative)``, ``("decomposition", None)``, ``("none", None)`` or ``(None, None)``."""
    entry = DERIVATIVES.get(op)
    if entry is not None:
        return "formula", entry
    if op in THROUGH_DECOMPOSITION:
        return "decomposition", None
    if op in NONDIFFERENTIABLE:
        return "none", None
    return None, None
