"""The ONNX graph under construction, and the helpers every emission rule uses.

A rule (see :mod:`._rules`) gets a :class:`GraphBuilder` ``g`` and the node's arguments
with tensors replaced by ONNX value names (``str``). It adds nodes with
``g.op("Relu", x)`` and constants with ``g.const(...)``/``g.i64(...)``, reads the
example shape and dtype of any value it was given with ``g.meta(x)``, and returns the
name(s) of its outputs. Integers that depend on dynamic axes arrive as
:class:`~._dynamic.SymInt`; ``g.i64`` and ``g.i64_scalar`` turn them into graph
computations over the inputs' runtime shapes.
"""

from __future__ import annotations

import numpy as np

from ._dynamic import SymInt

__all__ = ["GraphBuilder", "UnsupportedOperatorError", "onnx_dtype", "numpy_dtype"]


class UnsupportedOperatorError(RuntimeError):
    """An op (or an op with these arguments) has no ONNX rule.

    Attributes:
        op (str): the op's name.
        node (str): the FX node's name.
        location (str or None): the user code that made the node.
    """

    def __init__(self, message, op=None, node=None, location=None):
        super().__init__(message)
        self.op, self.node, self.location = op, node, location


_DTYPE_NAMES = {
    "float32": "FLOAT",
    "float64": "DOUBLE",
    "float16": "FLOAT16",
    "bfloat16": "BFLOAT16",
    "int64": "INT64",
    "int32": "INT32",
    "int16": "INT16",
    "int8": "INT8",
    "uint8": "UINT8",
    "bool": "BOOL",
    "complex64": "COMPLEX64",
    "complex128": "COMPLEX128",
}


def _dtype_name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def onnx_dtype(dtype):
    """The ``onnx.TensorProto`` element type of an ember dtype."""
    from onnx import TensorProto

    return getattr(TensorProto, _DTYPE_NAMES[_dtype_name(dtype)])


def numpy_dtype(dtype):
    """The numpy dtype of an ember dtype."""
    if _dtype_name(dtype) == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(_dtype_name(dtype))


def is_floating(dtype):
    return _dtype_name(dtype) in ("float32", "float64", "float16", "bfloat16")


class GraphBuilder:
    """Nodes, initializers and value metadata of the ONNX graph being emitted.

    Args:
        opset (int): the default-domain opset version rules emit for.
        dims (dict[str, tuple[str, int]]): dynamic axis name -> (graph input name, axis).
    """

    def __init__(self, opset, dims):
        self.opset = opset
        self.nodes = []
        self.initializers = []
        self._meta = {}  # ONNX value name -> TensorMeta
        self._sym_shapes = {}  # ONNX value name -> shape with SymInt sizes, for values whose shape is dynamic
        self._used = set()
        self._dims = dims
        self._dim_values = {}  # DimExpr or axis name -> value name
        self._consts = {}  # (dtype, shape, bytes) -> initializer name, for small constants
        self.current = None  # the FX node being emitted
        self.out = None  # its example TensorMeta (or tuple of them)

    # -- names and metadata -------------------------------------------------------------------------

    def fresh(self, hint):
        """A value or node name not used yet, derived from ``hint``."""
        name, k = hint, 0
        while name in self._used:
            k += 1
            name = f"{hint}_{k}"
        self._used.add(name)
        return name

    def reserve(self, name):
        """Claim ``name`` (a graph input or initializer name)."""
        if name in self._used:
            raise ValueError(f"the name {name!r} is given to two graph inputs or outputs; names must differ")
        self._used.add(name)
        return name

    def set_meta(self, name, meta, sym_shape=None):
        self._meta[name] = meta
        if sym_shape is not None:
            self._sym_shapes[name] = sym_shape

    def size(self, x, axis):
        """The size of ``axis`` of value ``x``: an int, or a :class:`SymInt` where it follows dynamic axes."""
        sym = self._sym_shapes.get(x)
        return sym[axis] if sym is not None else self._meta[x].shape[axis]

    def out_size(self, k, axis):
        """The size of ``axis`` of the current node's ``k``-th output: an int, or a SymInt for a dynamic one."""
        metas = self.out if isinstance(self.out, tuple) else (self.out,)
        sym = self.current.meta.get("sym_shape")
        if sym is not None:
            sym = sym if isinstance(self.out, tuple) else (sym,)
            size = sym[k][axis]
            if isinstance(size, SymInt):
                if size.expr is None:
                    self.unsupported(
                        f"the size of axis {axis} of output {k} changes with the dynamic axes in a way "
                        "that is not a product of them"
                    )
                return size
        return metas[k].shape[axis]

    def meta(self, x):
        """The example :class:`~._capture.TensorMeta` of value ``x`` (a value a rule was given)."""
        return self._meta[x]

    def rank(self, x):
        return len(self._meta[x].shape)

    def dtype(self, x):
        return self._meta[x].dtype

    def unsupported(self, reason):
        """Raise :class:`UnsupportedOperatorError` for the current node, explaining ``reason``."""
        from ._capture import describe

        node = self.current
        op = getattr(node.target, "name", str(node.target))
        where = node.meta.get("location")
        raise UnsupportedOperatorError(
            f"ember.onnx.export: op {op!r} ({describe(node)}): {reason}",
            op=op,
            node=node.name,
            location=where,
        )

    # -- nodes --------------------------------------------------------------------------------------

    def op(self, op_type, *inputs, outputs=1, **attrs):
        """Add an ONNX node; returns its output name (or a list of ``outputs`` names when ``outputs > 1``).

        ``None`` inputs become ``""`` (an omitted optional input); ``None`` attributes are left out.
        """
        from onnx import helper

        hint = self.current.name if self.current is not None else op_type.lower()
        names = [self.fresh(hint) for _ in range(outputs)]
        node = helper.make_node(
            op_type,
            ["" if i is None else i for i in inputs],
            names,
            name=self.fresh(f"{op_type}_{hint}"),
            **{k: v for k, v in attrs.items() if v is not None},
        )
        if self.current is not None and self.current.meta.get("location"):
            node.doc_string = self.current.meta["location"]
        self.nodes.append(node)
        return names[0] if outputs == 1 else names

    def initializer(self, name, array):
        """Add ``array`` (numpy) as the initializer ``name`` (already reserved)."""
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(np.array(array, order="C", copy=True), name))
        return name

    def const(self, value, dtype=None, hint="const"):
        """A constant (numpy array or Python scalar/list, in numpy ``dtype`` if given) as an initializer."""
        array = np.asarray(value, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes()) if array.size <= 64 else None
        if key is not None and key in self._consts:
            return self._consts[key]
        name = self.initializer(self.fresh(hint), array)
        if key is not None:
            self._consts[key] = name
        return name

    def scalar(self, value, dtype):
        """A 0-d constant of ember ``dtype``."""
        return self.const(np.array(value, dtype=numpy_dtype(dtype)))

    def cast_scalar(self, x, dtype):
        """An int64 value made inside a rule (no metadata), converted to ember ``dtype``."""
        if _dtype_name(dtype) == "int64":
            return x
        return self.op("Cast", x, to=onnx_dtype(dtype))

    def cast(self, x, dtype):
        """``x`` converted to ember ``dtype`` (no node when it already is)."""
        if _dtype_name(self.dtype(x)) == _dtype_name(dtype):
            return x
        out = self.op("Cast", x, to=onnx_dtype(dtype))
        self.set_meta(out, type(self._meta[x])(self._meta[x].shape, dtype))
        return out

    # -- integers, static or dynamic -----------------------------------------------------------------

    def i64(self, values):
        """A 1-D int64 tensor of ``values`` (ints and :class:`SymInt`)."""
        values = list(values)
        if not any(isinstance(v, SymInt) for v in values):
            return self.const(np.array(values, dtype=np.int64).reshape(len(values)))
        pieces, run = [], []
        for v in values:
            if isinstance(v, SymInt):
                if run:
                    pieces.append(self.const(np.array(run, dtype=np.int64)))
                    run = []
                pieces.append(self.dim(v.expr))
            else:
                run.append(int(v))
        if run:
            pieces.append(self.const(np.array(run, dtype=np.int64)))
        return pieces[0] if len(pieces) == 1 else self.op("Concat", *pieces, axis=0)

    def i64_scalar(self, value):
        """A 0-d int64 tensor of an int or :class:`SymInt`."""
        if not isinstance(value, SymInt):
            return self.const(np.array(int(value), dtype=np.int64))
        return self.op("Reshape", self.dim(value.expr), self.const(np.zeros(0, dtype=np.int64)))

    def axis_size(self, name):
        """The runtime size of dynamic axis ``name`` as a 1-D int64 tensor of one element."""
        if name not in self._dim_values:
            source, axis = self._dims[name]
            self._dim_values[name] = self.op("Shape", source, start=axis, end=axis + 1)
        return self._dim_values[name]

    def dim(self, expr):
        """A :class:`~._dynamic.DimExpr` computed at run time, as a 1-D int64 tensor of one element."""
        if expr in self._dim_values:
            return self._dim_values[expr]
        value = None
        for name, power in expr.powers:
            for _ in range(power):
                size = self.axis_size(name)
                value = size if value is None else self.op("Mul", value, size)
        if expr.coeff.numerator != 1 or value is None:
            factor = self.const(np.array([expr.coeff.numerator], dtype=np.int64))
            value = factor if value is None else self.op("Mul", value, factor)
        if expr.coeff.denominator != 1:
            value = self.op("Div", value, self.const(np.array([expr.coeff.denominator], dtype=np.int64)))
        if expr.offset:
            value = self.op("Add", value, self.const(np.array([expr.offset], dtype=np.int64)))
        self._dim_values[expr] = value
        return value
