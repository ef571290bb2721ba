"""ONNX rules for neural-network ops: matrix products, convolution, pooling, normalisation,
embedding, dropout, attention, softmax and reductions."""

from __future__ import annotations

import math

import numpy as np

from ._builder import numpy_dtype
from ._rules_shape import axis
from ._table import RuleTable

TABLE = RuleTable("nn")


def _tuple(value, n):
    """``value`` as an n-tuple of ints (an int is repeated, as ember's nn ops do)."""
    if isinstance(value, (tuple, list)):
        return tuple(int(v) for v in value) if len(value) == n else tuple(int(value[0]) for _ in range(n))
    return (int(value),) * n


# -- matrix products --------------------------------------------------------------------------------


@TABLE.register("linear")
def _linear(g, input, weight, bias=None, **_):
    if g.rank(input) == 2 and g.rank(weight) == 2:
        return g.op("Gemm", input, weight, bias, transB=1)
    out = g.op("MatMul", input, g.op("Transpose", weight, perm=[1, 0]))
    return out if bias is None else g.op("Add", out, bias)


@TABLE.register("matmul", "bmm", "mm")
def _matmul(g, input, **args):
    other = args.get("other", args.get("mat2"))
    return g.op("MatMul", input, other)


@TABLE.register("baddbmm")
def _baddbmm(g, input, batch1, batch2, beta=1, alpha=1, **_):
    dtype = g.out.dtype
    product = g.op("MatMul", batch1, batch2)
    if alpha != 1:
        product = g.op("Mul", product, g.scalar(alpha, dtype))
    if beta == 0:  # PyTorch ignores input (even NaN) when beta is 0
        return product
    scaled = input if beta == 1 else g.op("Mul", input, g.scalar(beta, dtype))
    return g.op("Add", scaled, product)


@TABLE.register("mv", "dot")
def _vector_product(g, input, **args):
    return g.op("MatMul", input, args.get("vec", args.get("tensor")))


@TABLE.register("outer")
def _outer(g, input, vec2, **_):
    return g.op("Mul", g.op("Unsqueeze", input, g.i64([1])), g.op("Unsqueeze", vec2, g.i64([0])))


@TABLE.register("addmm")
def _addmm(g, input, mat1, mat2, beta=1, alpha=1, **_):
    return g.op("Gemm", mat1, mat2, input, alpha=float(alpha), beta=float(beta))


@TABLE.register("einsum")
def _einsum(g, equation, operands, **_):
    if len(operands) == 1 and isinstance(operands[0], (tuple, list)):
        operands = operands[0]
    return g.op("Einsum", *operands, equation=equation.replace(" ", ""))


# -- convolution and pooling -----------------------------------------------------------------------


def _conv(g, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, **_):
    n = g.rank(weight) - 2
    if g.rank(input) != n + 2:
        g.unsupported(f"an unbatched input of shape {g.meta(input).shape}")
    kernel = g.meta(weight).shape[2:]
    dilation = _tuple(dilation, n)
    if padding == "valid":
        padding = (0,) * n
    elif padding == "same":
        # PyTorch's "same": the total padding d*(k-1), the odd one at the end
        totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
        pads = [t // 2 for t in totals] + [t - t // 2 for t in totals]
    if padding != "same":
        pads = list(_tuple(padding, n)) * 2
    return g.op(
        "Conv", input, weight, bias, strides=list(_tuple(stride, n)), pads=pads, dilations=list(dilation), group=groups
    )


for _name in ("conv1d", "conv2d", "conv3d"):
    TABLE.add(_name, _conv)


def _pool_window(n, kernel_size, stride, padding):
    """The ONNX ``kernel_shape``/``strides``/``pads`` of an ``n``-d pool (no stride: the kernel)."""
    kernel = list(_tuple(kernel_size, n))
    strides = list(kernel) if stride is None or stride == [] or stride == () else list(_tuple(stride, n))
    return {"kernel_shape": kernel, "strides": strides, "pads": list(_tuple(padding, n)) * 2}


def _max_pool(g, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False, **_):
    if return_indices:
        g.unsupported("return_indices=True")
    n = g.rank(input) - 2
    return g.op(
        "MaxPool",
        input,
        **_pool_window(n, kernel_size, stride, padding),
        dilations=list(_tuple(dilation, n)),
        ceil_mode=int(bool(ceil_mode)),
    )


def _avg_pool(g, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, **args):
    if args.get("divisor_override") is not None:
        g.unsupported("divisor_override")
    return g.op(
        "AveragePool",
        input,
        **_pool_window(g.rank(input) - 2, kernel_size, stride, padding),
        ceil_mode=int(bool(ceil_mode)),
        count_include_pad=int(bool(count_include_pad)),
    )


def _adaptive_avg_pool(g, input, output_size, **_):
    n = g.rank(input) - 2
    out = _tuple(output_size, n)
    spatial = g.meta(input).shape[2:]
    if all(o == 1 for o in out):
        return g.op("GlobalAveragePool", input)
    if any(s % o for s, o in zip(spatial, out)):
        g.unsupported(f"output_size {out} does not divide the input's spatial size {spatial}")
    kernel = [s // o for s, o in zip(spatial, out)]
    return g.op("AveragePool", input, kernel_shape=kernel, strides=kernel)


for _n in ("1d", "2d"):
    TABLE.add(f"max_pool{_n}", _max_pool)
    TABLE.add(f"avg_pool{_n}", _avg_pool)
    TABLE.add(f"adaptive_avg_pool{_n}", _adaptive_avg_pool)


# -- normalisation, embedding, dropout --------------------------------------------------------------


def _ones(g, shape, dtype, value=1.0):
    return g.const(np.full(shape, value, dtype=numpy_dtype(dtype)), hint="ones" if value else "zeros")


@TABLE.register("batch_norm")
def _batch_norm(g, input, running_mean, running_var, weight=None, bias=None, training=False, eps=1e-5, **_):
    if training or running_mean is None or running_var is None:
        g.unsupported("batch statistics (training=True or no running stats); export in eval mode")
    channels = g.meta(running_mean).shape
    dtype = g.dtype(input)
    weight = _ones(g, channels, dtype) if weight is None else weight
    bias = _ones(g, channels, dtype, 0.0) if bias is None else bias
    return g.op("BatchNormalization", input, weight, bias, running_mean, running_var, epsilon=float(eps))


@TABLE.register("layer_norm")
def _layer_norm(g, input, normalized_shape, weight=None, bias=None, eps=1e-5, **_):
    shape = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else (normalized_shape,)
    dtype = g.dtype(input)
    weight = _ones(g, shape, dtype) if weight is None else weight
    # an explicit zero bias: onnxruntime 1.32 crashes on LayerNormalization without one and without a weight
    bias = _ones(g, shape, dtype, 0.0) if bias is None else bias
    return g.op("LayerNormalization", input, weight, bias, axis=-len(shape), epsilon=float(eps))


@TABLE.register("group_norm")
def _group_norm(g, input, num_groups, weight=None, bias=None, eps=1e-5, **_):
    # normalise (N, G, -1) over its last axis, then scale and shift per channel
    rank = g.rank(input)
    grouped = g.op("Reshape", input, g.i64([0, num_groups, -1]))
    mean = reduce(g, "ReduceMean", grouped, [2], True, rank=3)
    centered = g.op("Sub", grouped, mean)
    var = reduce(g, "ReduceMean", g.op("Mul", centered, centered), [2], True, rank=3)
    dtype = g.dtype(input)
    normed = g.op("Div", centered, g.op("Sqrt", g.op("Add", var, g.scalar(eps, dtype))))
    out = g.op("Reshape", normed, g.op("Shape", input))
    per_channel = g.i64([-1] + [1] * (rank - 2))
    if weight is not None:
        out = g.op("Mul", out, g.op("Reshape", weight, per_channel))
    if bias is not None:
        out = g.op("Add", out, g.op("Reshape", bias, per_channel))
    return out


@TABLE.register("embedding")
def _embedding(g, input, weight, padding_idx=None, max_norm=None, **_):
    if max_norm is not None:
        g.unsupported("max_norm (it renormalises the weight in place)")
    return g.op("Gather", weight, input, axis=0)


@TABLE.register("dropout")
def _dropout(g, input, p=0.5, training=True, **_):
    if not training or p == 0:
        return g.op("Identity", input)
    import ember

    return g.op("Dropout", input, g.scalar(p, g.dtype(input)), g.scalar(True, ember.bool))


# -- attention and softmax -------------------------------------------------------------------------


def _neg_inf_mask(g, scores, keep):
    """``scores`` where ``keep`` (bool) is true, -inf elsewhere."""
    return g.op("Where", keep, scores, g.scalar(-math.inf, g.out.dtype))


@TABLE.register("scaled_dot_product_attention")
def _sdpa(g, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False, **_):
    if enable_gqa and g.meta(query).shape[-3] != g.meta(key).shape[-3]:
        g.unsupported("enable_gqa with fewer key/value heads than query heads")
    if dropout_p:
        g.unsupported(f"dropout_p={dropout_p} (attention dropout only runs in training)")
    dtype = g.out.dtype
    rank = g.rank(key)
    scale = 1.0 / math.sqrt(g.meta(query).shape[-1]) if scale is None else scale
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    scores = g.op("MatMul", g.op("Mul", query, g.scalar(scale, dtype)), g.op("Transpose", key, perm=perm))
    if is_causal:
        # a lower-triangular (L, S) mask of the runtime query and key lengths
        lq = g.op("Shape", query, start=-2, end=-1)
        lk = g.op("Shape", key, start=-2, end=-1)
        ones = g.op("ConstantOfShape", g.op("Concat", lq, lk, axis=0), value=_bool_tensor(True))
        scores = _neg_inf_mask(g, scores, g.op("Trilu", ones, upper=0))
    if attn_mask is not None:
        if str(g.dtype(attn_mask)) == "ember.bool":
            scores = _neg_inf_mask(g, scores, attn_mask)
        else:
            scores = g.op("Add", scores, g.cast(attn_mask, dtype))
    return g.op("MatMul", g.op("Softmax", scores, axis=-1), value)


def _bool_tensor(value):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.array([value], dtype=np.bool_))


def _softmax(onnx_op):
    def rule(g, input, dim=None, dtype=None, **_):
        if dim is None:
            g.unsupported("dim=None (implicit dimension); pass dim")
        x = g.cast(input, g.out.dtype)
        return g.op(onnx_op, x, axis=axis(dim, g.rank(input)))

    return rule


TABLE.add("softmax", _softmax("Softmax"))
TABLE.add("log_softmax", _softmax("LogSoftmax"))


# -- reductions ------------------------------------------------------------------------------------


def _dims(dim, rank):
    """The reduced axes, or None for all of them (``dim`` None or empty)."""
    if dim is None:
        return None
    dims = list(dim) if isinstance(dim, (tuple, list)) else [dim]
    return [axis(d, rank) for d in dims] or None


def reduce(g, onnx_op, x, dim, keepdim, rank=None):
    """``onnx_op`` over ``dim`` (None: all axes) of ``x`` (of ``rank``, default its example's).

    Axes are an input from opset 18 (ReduceSum: 13), an attribute before.
    """
    dims = _dims(dim, g.rank(x) if rank is None else rank)
    keep = int(bool(keepdim))
    if dims is None:
        return g.op(onnx_op, x, keepdims=keep)
    if onnx_op == "ReduceSum" or g.opset >= 18:
        return g.op(onnx_op, x, g.i64(dims), keepdims=keep)
    return g.op(onnx_op, x, axes=dims, keepdims=keep)


def _reduction(onnx_op):
    def rule(g, input, dim=None, keepdim=False, **_):
        return reduce(g, onnx_op, g.cast(input, g.out.dtype), dim, keepdim)

    return rule


for _name, _onnx in {
    "sum": "ReduceSum",
    "mean": "ReduceMean",
    "amax": "ReduceMax",
    "amin": "ReduceMin",
    "prod": "ReduceProd",
    "logsumexp": "ReduceLogSumExp",
}.items():
    TABLE.add(_name, _reduction(_onnx))


def _arg_reduction(onnx_op):
    def rule(g, input, dim=None, keepdim=False, **_):
        if dim is None:
            return g.op(onnx_op, g.op("Reshape", input, g.i64([-1])), axis=0, keepdims=0)
        return g.op(onnx_op, input, axis=axis(dim, g.rank(input)), keepdims=int(bool(keepdim)))

    return rule


TABLE.add("argmax", _arg_reduction("ArgMax"))


@TABLE.register("linalg_vector_norm")
def _vector_norm(g, x, ord=2, dim=None, keepdim=False, dtype=None, **_):
    """``linalg.vector_norm`` (which ``normalize`` and ``cosine_similarity`` decompose to): ReduceL2/ReduceL1,
    ReduceMax/ReduceMin of Abs for +-inf, a count of nonzeros for 0, ``ReduceSum(|x|**p) ** (1/p)`` otherwise."""
    import math

    if g.dtype(x).is_complex:
        g.unsupported("complex input (ONNX has no complex tensors)")
    out_dtype = g.out.dtype
    rank = g.rank(x)
    # a 0-d tensor takes dim 0 or -1 but has no axis: reduce "all" (none), which keeps its one element
    dim = None if rank == 0 else dim
    x = g.cast(x, out_dtype)
    if ord == 2:
        return reduce(g, "ReduceL2", x, dim, keepdim)
    if ord == 1:
        return reduce(g, "ReduceL1", x, dim, keepdim)
    magnitude = g.op("Abs", x)
    if ord == math.inf:
        return reduce(g, "ReduceMax", magnitude, dim, keepdim, rank=rank)
    if ord == -math.inf:
        return reduce(g, "ReduceMin", magnitude, dim, keepdim, rank=rank)
    if ord == 0:
        nonzero = g.op("Cast", g.op("Not", g.op("Equal", x, g.scalar(0, out_dtype))), to=_onnx_type(out_dtype))
        return reduce(g, "ReduceSum", nonzero, dim, keepdim, rank=rank)
    powered = g.op("Pow", magnitude, g.scalar(ord, out_dtype))
    return g.op("Pow", reduce(g, "ReduceSum", powered, dim, keepdim, rank=rank), g.scalar(1.0 / ord, out_dtype))


def _all_or_any(onnx_op):
    """``all``/``any`` as ReduceMin/ReduceMax over the input as 0/1 integers."""

    def rule(g, input, dim=None, keepdim=False, **_):
        import ember

        as_int = g.op("Cast", g.op("Cast", input, to=_onnx_type(ember.bool)), to=_onnx_type(ember.int32))
        reduced = reduce(g, onnx_op, as_int, dim, keepdim, rank=g.rank(input))
        return g.op("Cast", reduced, to=_onnx_type(ember.bool))

    return rule


TABLE.add("all", _all_or_any("ReduceMin"))
TABLE.add("any", _all_or_any("ReduceMax"))
TABLE.add("argmin", _arg_reduction("ArgMin"))


def _max_or_min(reduce_op, arg_op, binary_op):
    def rule(g, input, dim=None, keepdim=False, other=None, **_):
        if other is not None:
            dtype = g.out.dtype
            return g.op(binary_op, g.cast(input, dtype), g.cast(other, dtype))
        if dim is None:
            return reduce(g, reduce_op, input, None, False)
        values = reduce(g, reduce_op, input, [dim], keepdim)
        indices = g.op(arg_op, input, axis=axis(dim, g.rank(input)), keepdims=int(bool(keepdim)))
        return [values, indices]

    return rule


TABLE.add("max", _max_or_min("ReduceMax", "ArgMax", "Max"))
TABLE.add("min", _max_or_min("ReduceMin", "ArgMin", "Min"))


@TABLE.register("cumsum")
def _cumsum(g, input, dim, **_):
    return g.op("CumSum", g.cast(input, g.out.dtype), g.i64_scalar(axis(dim, g.rank(input))))


def _var_or_std(g, input, dim=None, unbiased=None, keepdim=False, correction=None, **_):
    correction = (1 if unbiased is None or unbiased else 0) if correction is None else correction
    dtype = g.out.dtype
    x = g.cast(input, dtype)
    centered = g.op("Sub", x, reduce(g, "ReduceMean", x, dim, True))
    mean_square = reduce(g, "ReduceMean", g.op("Mul", centered, centered), dim, keepdim, rank=g.rank(input))
    # the number of reduced elements at run time: size(x) / size(mean)
    count = g.op(
        "Div",
        g.op("Size", x),
        g.op("Size", reduce(g, "ReduceMean", x, dim, True)),
    )
    count = g.op("Cast", count, to=_onnx_type(dtype))
    factor = g.op("Div", count, g.op("Sub", count, g.scalar(correction, dtype)))
    var = g.op("Mul", mean_square, factor)
    return g.op("Sqrt", var) if g.current.target.name == "std" else var


def _onnx_type(dtype):
    from ._builder import onnx_dtype

    return onnx_dtype(dtype)


TABLE.add("var", _var_or_std)
TABLE.add("std", _var_or_std)
