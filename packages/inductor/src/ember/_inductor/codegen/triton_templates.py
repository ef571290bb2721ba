"""Triton matmul templates: a block-tiled ``mm`` / ``bmm`` kernel with its pointwise epilogue in the store.

Under ``mode="max-autotune"`` (:mod:`ember._inductor.select_algorithm`) an extern ``matmul`` call of a cuda
graph may be replaced by one generated kernel written from this template:

* each program computes one ``[BLOCK_M, BLOCK_N]`` tile of ``C = A @ B`` (one matrix of a batch for
  ``bmm``: the grid's second axis), stepping along ``K`` by ``BLOCK_K`` with a float32 accumulator;
  float16 / bfloat16 inputs go to ``tl.dot`` as they are (tensor cores), float32 ones with
  ``input_precision="ieee"`` (eager's float32 products use no TF32) unless
  ``ember.backends.cuda.matmul.allow_tf32`` asks for TF32;
* programs are numbered in groups of ``GROUP_M`` row blocks ("swizzle"): consecutive programs share the
  same few tiles of ``B`` while they are in the L2 cache;
* masks ``rm < M``, ``rn < N``, ``rk < K - k0`` make any size work (ragged edges read zeros);
* A and B are read through their strides, so a transposed operand (``x @ w.t()``) is not copied first;
* **the epilogue**: the pointwise kernel that reads the product (bias add, activation, residual add, a
  dtype cast...) is emitted inside the template, after the K loop, on the tile still in registers. The
  product itself is stored only when something else reads it (a graph output, a value saved for the
  backward, another kernel).

The epilogue's text comes from the ordinary Triton printer (:mod:`.triton`): the same op rules, dtype
conversions and masks, with the fused kernel's loop symbols ``x0..`` given by the tile's rows and columns.
This module only writes text (no Triton needed); :mod:`ember._inductor.select_algorithm` decides where a
template is used and runs it.
"""

from __future__ import annotations

import dataclasses
import math

import sympy

import ember

from .. import ir
from ..scheduler import FusedKernel
from . import triton as tgen

__all__ = ["MatmulProblem", "TemplateSource", "matmul_problem", "fusable_epilogue", "render", "template_configs",
           "TEMPLATE_DTYPES"]

#: The dtypes a template multiplies (others stay extern calls).
TEMPLATE_DTYPES = (ember.float32, ember.float16, ember.bfloat16)
#: The ops an extern call may be for a template to replace it (after aot every product is ``matmul``).
_PRODUCTS = frozenset({"matmul", "mm", "bmm"})


@dataclasses.dataclass
class MatmulProblem:
    """One product ``out = a @ b`` a template can compute.

    Attributes:
        kernel (ExternKernel): the extern call it would replace.
        a, b: the operands as the extern call holds them (:class:`~ember._inductor.ir.StridedArg` or a buffer).
        out (ExternOutput): the product's buffer (contiguous).
        batch, m, n, k: ``bmm`` of ``batch`` matrices (1 for ``mm``), ``[m, k] @ [k, n]`` each (SymPy
            integers; expressions of size symbols under dynamic shapes: the kernel takes them as arguments).
        batched (bool): the operands have batch dims (``bmm``; several are folded into one).
        a_strides (tuple): A's strides along (batch, m, k); batch stride 0 for ``mm``.
        b_strides (tuple): B's strides along (batch, k, n).
        dtype: the operands' and the product's dtype.
    """

    kernel: object
    a: object
    b: object
    out: object
    batch: int
    m: int
    n: int
    k: int
    batched: bool
    a_strides: tuple
    b_strides: tuple
    dtype: object

    def signature(self) -> str:
        """The sizes, strides and dtype, as one string (a key of the selection cache; symbolic sizes are
        given with their values at the hints, where they were benchmarked)."""
        text = (f"{'bmm' if self.batched else 'mm'} b{self.batch} m{self.m} n{self.n} k{self.k} "
                f"a{self.a_strides} b{self.b_strides} {self.dtype}")
        if any(not sympy.sympify(v).is_Integer for v in (self.batch, self.m, self.n, self.k)):
            text += f" at b{self.hint(self.batch)} m{self.hint(self.m)} n{self.hint(self.n)} k{self.hint(self.k)}"
        return text

    @staticmethod
    def hint(expr) -> int:
        """The int value of a size (at the hints of :func:`ember._inductor.ir.size_hints` when symbolic)."""
        return ir.size_hint(expr)

    def __str__(self):
        lead = f"{self.batch} x " if self.batched else ""
        return f"{self.out.name} = {lead}[{self.m}, {self.k}] @ [{self.k}, {self.n}] ({self.dtype})"


def _layout(arg):
    """``(sizes, strides)`` (SymPy) of an extern operand, or None when it is not a strided buffer or a size
    has no value (a symbol outside :func:`ember._inductor.ir.size_hints`)."""
    if not isinstance(arg, (ir.StridedArg, ir.Buffer)):
        return None
    sizes, strides = [sympy.sympify(s) for s in arg.sizes], [sympy.sympify(s) for s in arg.strides]
    try:
        for v in (*sizes, *strides):
            ir.size_hint(v)
    except (TypeError, ValueError):
        return None
    return sizes, strides


def _same(a, b):
    """Whether two size expressions are equal for every value of their symbols."""
    return sympy.expand(sympy.sympify(a) - sympy.sympify(b)) == 0


def matmul_problem(step):
    """The :class:`MatmulProblem` of an extern call, or a string saying why a template cannot replace it.

    A template takes ``matmul``/``mm``/``bmm`` of two 2-D operands, or of two operands of equal rank whose
    leading (batch) dims are the same or all ones for one of them (broadcast) and fold into one evenly
    strided batch (a ``[B, H, T, D]`` attention product is ``B * H`` matrices), both float32, float16 or
    bfloat16 (the same), whose result is one contiguous tensor. Sizes may be symbolic (dynamic shapes): the
    kernel takes them as arguments.
    """
    if not isinstance(step, ir.ExternKernel) or step.op.name not in _PRODUCTS:
        return "not a matrix product"
    if step.kwargs or len(step.args) != 2 or len(step.outputs) != 1:
        return "not a call with two operands"
    a, b = step.args
    out = step.outputs[0]
    la, lb = _layout(a), _layout(b)
    if la is None or lb is None:
        return "an operand is not a strided buffer with known sizes"
    (sa, ta), (sb, tb) = la, lb
    if a.dtype != b.dtype or a.dtype not in TEMPLATE_DTYPES or out.dtype != a.dtype:
        return f"dtypes {a.dtype} @ {b.dtype}: the template multiplies float32, float16 or bfloat16"
    if len(sa) == len(sb) == 2:
        batch, batched = sympy.Integer(1), False
        sa, ta, sb, tb = [1, *sa], [0, *ta], [1, *sb], [0, *tb]
    elif len(sa) == len(sb) >= 3:
        folded = _fold_batch(sa, ta, sb, tb)
        if folded is None:
            return f"operand shapes {sa} @ {sb}: batch dims the template cannot fold into one"
        batch, batched = folded[0], True
        sa, ta, sb, tb = [batch, *sa[-2:]], [folded[1], *ta[-2:]], [batch, *sb[-2:]], [folded[2], *tb[-2:]]
    else:
        return f"operand shapes {sa} @ {sb}: the template takes mm and (batched) bmm"
    m, k, n = sa[1], sa[2], sb[2]
    if not _same(sb[1], k) or min(ir.size_hint(v) for v in (batch, m, n, k)) < 1:
        return f"operand shapes {sa} @ {sb}"
    if not all(_same(x, y) for x, y in zip(out.strides, ir.contiguous_strides(out.sizes))):
        return "the product is kept in a non-contiguous layout"
    ta, tb = tuple(sympy.sympify(t) for t in ta), tuple(sympy.sympify(t) for t in tb)
    return MatmulProblem(step, a, b, out, sympy.sympify(batch), m, n, k, batched, ta, tb, a.dtype)


def _batch_stride(sizes, strides):
    """The one stride that steps through batch dims ``sizes`` (row-major order), or None when they are not
    evenly spaced (a permuted or sliced batch). Dims of size 1 do not count."""
    dims = [(n, st) for n, st in zip(sizes, strides) if not _same(n, 1)]
    if not dims:
        return 0
    for (_, outer), (n, inner) in zip(dims, dims[1:]):
        if not _same(outer, inner * n):
            return None
    return dims[-1][1]


def _fold_batch(sa, ta, sb, tb):
    """``(batch, stride_ab, stride_bb)`` for the leading dims of two operands of equal rank: the same batch
    shape, or one operand's all ones (broadcast: stride 0), each evenly spaced; None otherwise."""
    lead_a, lead_b = sa[:-2], sb[:-2]
    ones_a, ones_b = all(_same(n, 1) for n in lead_a), all(_same(n, 1) for n in lead_b)
    if not (ones_a or ones_b or all(_same(x, y) for x, y in zip(lead_a, lead_b))):
        return None
    stride_a, stride_b = _batch_stride(lead_a, ta[:-2]), _batch_stride(lead_b, tb[:-2])
    if stride_a is None or stride_b is None:
        return None
    batch = sympy.sympify(math.prod(lead_b if ones_a else lead_a))
    return batch, 0 if ones_a else stride_a, 0 if ones_b else stride_b


def _linear_index(symbols, ranges):
    out, stride = sympy.Integer(0), sympy.Integer(1)
    for v, r in reversed(list(zip(symbols, ranges))):
        out += v * stride
        stride *= sympy.sympify(r)
    return out


def fusable_epilogue(problem, kernel):
    """Whether ``kernel`` (the step after the product) can be the template's epilogue; ``(bool, reason)``.

    It can when it is pointwise (no reduction, no inner loop), covers as many elements as the product, and
    every read of the product is of the element the kernel's iteration stores (the template holds only its
    own tile). Its other reads are of buffers computed before the product, as it ran after it.
    """
    if not isinstance(kernel, FusedKernel):
        return False, "the next step is not a generated kernel"
    out = problem.out
    if not any(ld.buffer.name == out.name for node in kernel.nodes for ld in ir.loads(node.body)):
        return False, f"{kernel.name} does not read {out.name}"
    if any(node.is_reduction or node.inner_ranges for node in kernel.nodes):
        return False, f"{kernel.name} reduces (only pointwise epilogues are fused)"
    numel = sympy.Integer(1)
    for r in kernel.ranges:
        numel *= sympy.sympify(r)
    if not _same(numel, problem.batch * problem.m * problem.n):
        return False, f"{kernel.name} covers {numel} elements, the product {problem.batch * problem.m * problem.n}"
    linear = _linear_index(kernel.vars, kernel.ranges)
    for node in kernel.nodes:
        for ld in ir.loads(node.body):
            if ld.buffer.name == out.name and sympy.expand(ir.flat_index(ld.index, out.strides) - linear) != 0:
                return False, f"{node.buffer.name} reads {out.name} at another element"
    return True, f"{kernel.name} reads {out.name} element by element"


@dataclasses.dataclass
class TemplateSource:
    """One rendered template.

    Attributes:
        name (str): the ``@triton.jit`` function's name.
        source (str): its text.
        buffers (list[str]): the buffers passed after ``a_ptr, b_ptr``, in order.
        sizes (list): SymPy sizes passed as ``ks0..`` after the product's sizes and strides.
        stores_product (bool): the product itself is stored (someone else reads it).
        epilogue (FusedKernel or None): the fused kernel.
    """

    name: str
    source: str
    buffers: list
    sizes: list
    stores_product: bool
    epilogue: object


class _TemplateGen(tgen._KernelGen):
    """The template's text; the epilogue nodes are printed by the pointwise printer of :mod:`.triton`."""

    def __init__(self, problem, epilogue):
        self.problem = problem
        kernel = epilogue if epilogue is not None else \
            FusedKernel("epilogue", [s for s in problem.out.sizes if not _same(s, 1)])
        super().__init__(kernel)
        self.epilogue = epilogue

    def _dot(self, allow_tf32):
        if self.problem.dtype == ember.float32:
            precision = "tf32" if allow_tf32 else "ieee"
            return f'tl.dot(a, b, acc, input_precision="{precision}")'
        return "tl.dot(a, b, acc)"

    def _tile_symbols(self, lines):
        """Lines giving the epilogue kernel's loop symbols for the tile's elements."""
        p = self.problem
        # each symbol has the tile's shape: a store's pointer must (Triton broadcasts values, not pointers)
        dims = [(p.batch, "tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32) + batch")] if p.batched else []
        dims += [(p.m, "tl.broadcast_to(rm[:, None], (BLOCK_M, BLOCK_N))"),
                 (p.n, "tl.broadcast_to(rn[None, :], (BLOCK_M, BLOCK_N))")]
        ranges = [sympy.sympify(r) for r in self.kernel.ranges]
        dims = [(size, code) for size, code in dims if not _same(size, 1)]
        if len(ranges) == len(dims) and all(_same(r, size) for r, (size, _) in zip(ranges, dims)):
            for v, (_, code) in zip(self.kernel.vars, dims):
                lines.append(f"    {v.name} = {code}")
        else:  # another shape over the same elements (a reshaped product): from the flat index
            self._decompose(lines, "    ", "xindex", self.kernel.vars, ranges)

    def render(self, name, stores_product, allow_tf32=False):
        """The template's :class:`TemplateSource` (``stores_product``: write the product itself too)."""
        p, out = self.problem, self.problem.out
        lines = []
        lines.append(f"    # {p}: [BLOCK_M, BLOCK_N] tiles, a float32 accumulator, K in steps of BLOCK_K")
        lines.append("    pid = tl.program_id(0)")
        if p.batched:
            lines.append("    batch = tl.program_id(1)  # one matrix of the batch per grid row")
        lines += [
            "    # swizzle: GROUP_M row blocks take turns along a column of B tiles (they stay in L2)",
            "    grid_m = tl.cdiv(M, BLOCK_M)",
            "    grid_n = tl.cdiv(N, BLOCK_N)",
            "    per_group = GROUP_M * grid_n",
            "    first_m = (pid // per_group) * GROUP_M",
            "    rows = tl.minimum(grid_m - first_m, GROUP_M)",
            "    pid_m = first_m + (pid % per_group) % rows",
            "    pid_n = (pid % per_group) // rows",
            "    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
            "    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
            "    rk = tl.arange(0, BLOCK_K)",
        ]
        a_base = "a_ptr + batch * stride_ab" if p.batched else "a_ptr"
        b_base = "b_ptr + batch * stride_bb" if p.batched else "b_ptr"
        lines += [
            f"    a_tile = {a_base} + rm[:, None] * stride_am + rk[None, :] * stride_ak",
            f"    b_tile = {b_base} + rk[:, None] * stride_bk + rn[None, :] * stride_bn",
            "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
            "    for k0 in range(0, K, BLOCK_K):",
            "        a = tl.load(a_tile, mask=(rm[:, None] < M) & (rk[None, :] < K - k0), other=0.0)",
            "        b = tl.load(b_tile, mask=(rk[:, None] < K - k0) & (rn[None, :] < N), other=0.0)",
            f"        acc = {self._dot(allow_tf32)}",
            "        a_tile += BLOCK_K * stride_ak",
            "        b_tile += BLOCK_K * stride_bk",
            "    # epilogue: the tile's elements, in the fused kernel's loop symbols",
            "    xmask = (rm[:, None] < M) & (rn[None, :] < N)",
            "    xindex = " + ("(batch * M + rm[:, None])" if p.batched else "rm[:, None]") + " * N + rn[None, :]",
        ]
        self._tile_symbols(lines)
        product = "acc"
        if out.dtype != ember.float32:  # the product rounds to its dtype, as the extern call's result does
            product = self.tmp()
            lines.append(f"    {product} = acc.to({tgen.triton_type(out.dtype)}).to(tl.float32)")
        self.values[out.name] = product
        if stores_product:
            stored = product if out.dtype == ember.float32 else f"{product}.to({tgen.triton_type(out.dtype)})"
            lines.append(f"    tl.store({self.pointer(out)} + xindex, {stored}, xmask)  # {out.name}: read elsewhere")
        printer = tgen._Printer(self, lines, "    ", "[1, 1]")
        for node in self.kernel.nodes if self.epilogue is not None else ():
            self._comment(node, lines, "    ")
            self.store(node, printer.emit(node.body), lines, "    ")
        if self.error_flag:
            raise NotImplementedError("an epilogue that divides integers (its error flag) is not fused")
        batch_args = ["stride_ab"] if p.batched else []
        args = ["a_ptr", "b_ptr", *self.buffers.values(), "M", "N", "K", *batch_args, "stride_am", "stride_ak",
                *(["stride_bb"] if p.batched else []), "stride_bk", "stride_bn", *self.sizes.values(),
                "BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr", "BLOCK_K: tl.constexpr", "GROUP_M: tl.constexpr"]
        head = ["@triton.jit", f"def {name}({', '.join(args)}):"]
        source = "\n".join(head + lines) + "\n"
        return TemplateSource(name, source, list(self.buffers), list(self.sizes), stores_product, self.epilogue)


def render(problem, epilogue, name, *, stores_product=True, allow_tf32=False):
    """The text of a matmul template for ``problem`` with ``epilogue`` (a FusedKernel or None) in its store.

    Args:
        problem (MatmulProblem): the product.
        epilogue (FusedKernel or None): the pointwise kernel fused after it (see :func:`fusable_epilogue`).
        name (str): the function's name.
        stores_product (bool): also store the product (it is read outside the epilogue).
        allow_tf32 (bool): float32 operands multiply in TF32.

    Returns:
        TemplateSource: the function and its arguments.

    Raises:
        NotImplementedError: the epilogue cannot be printed inside the template (an integer division's
            error flag); the caller keeps the epilogue as its own kernel.
    """
    return _TemplateGen(problem, epilogue).render(name, stores_product, allow_tf32)


def _pow2_at_least(n, low, high):
    p = low
    while p < n and p < high:
        p *= 2
    return p


def template_configs(problem):
    """The block sizes a template is benchmarked with (``BLOCK_M/N/K``, ``GROUP_M``, ``num_warps``,
    ``num_stages``), the interpreter's choice first (large blocks, few programs), none larger than the
    problem needs (blocks are at least 16: ``tl.dot``'s smallest)."""
    m, n, k = (problem.hint(v) for v in (problem.m, problem.n, problem.k))
    first = {"BLOCK_M": _pow2_at_least(m, 16, 64), "BLOCK_N": _pow2_at_least(n, 16, 64),
             "BLOCK_K": _pow2_at_least(k, 16, 64), "GROUP_M": 8, "num_warps": 4, "num_stages": 2}
    out = [first]
    half = problem.dtype != ember.float32
    # few: each config is one Triton compile (a second or two) on the first compile of a graph
    for bm, bn, bk, warps, stages in ((64, 64, 32, 4, 3), (128, 128, 64 if half else 32, 8, 3),
                                      (128, 64, 32, 4, 4), (32, 32, 32, 2, 2)):
        cfg = {"BLOCK_M": min(bm, _pow2_at_least(m, 16, 128)), "BLOCK_N": min(bn, _pow2_at_least(n, 16, 128)),
               "BLOCK_K": min(bk, _pow2_at_least(k, 16, 128)), "GROUP_M": 8, "num_warps": warps,
               "num_stages": stages}
        if cfg not in out:
            out.append(cfg)
    return out
