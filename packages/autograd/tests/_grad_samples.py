"""Turning ``ember.testing.op_db`` samples into functions of their differentiable tensors.

The gradient tests (``test_ops_grad.py``, ``parity/test_grad_parity.py``) all
need the same thing from a :class:`~ember.testing.SampleInput`: the tensors
to differentiate with respect to (as fresh leaves), and a function of those
leaves that calls the op with everything else of the sample unchanged. That
is :class:`GradCase`.

Which tensors are differentiated (the rule, in one place):

* every float64 or complex128 tensor of the sample, at any depth of the
  arguments (``cat``'s list, ``einsum``'s operands, ``index_put``'s values);
  integer and bool tensors (indices, masks, targets) never are, nor are the
  lower-precision operands of mixed-dtype samples (a float16 ``tensor1`` of
  ``addcmul``: a finite-difference step of 1e-6 is below its resolution);
* except the arguments the derivative table declares ``nondiff`` for the op,
  and those listed in :data:`NONDIFF_ARGS` (PyTorch has no gradient for them
  either, so they must not require grad).

A tensor object that occurs several times in a sample (``mul(x, x)``) is one
leaf, so aliasing is exercised too. Leaves keep the sample's strides
(``detach`` is a view), so non-contiguous inputs stay non-contiguous.

Which samples are used: those whose differentiable inputs and outputs are
all finite (no gradient is defined at NaN/inf; the values themselves are
tested by ember-core's ``test_ops.py``), that have at least one
differentiable input, and that are not in :data:`NO_GRADIENT_SAMPLES`.
Random ops are called after ``ember.manual_seed`` every time, so finite
differences see the same random draws as the forward.
"""

from __future__ import annotations

import zlib

import numpy as np

import ember
from ember.autograd._table import DERIVATIVES

__all__ = [
    "FACTORY_PARAMETERS",
    "is_factory",
    "BACKWARD_NOT_IMPLEMENTED",
    "NONDIFF_ARGS",
    "NO_GRADIENT_SAMPLES",
    "GradCase",
    "grad_cases",
    "grad_dtypes",
    "is_differentiable_dtype",
    "random_like",
    "flatten_outputs",
]

#: Ops without gradients (``supports_autograd=False`` in op_db) whose outputs still require grad, as in
#: PyTorch: their backward raises NotImplementedError (PyTorch's ``not_implemented`` formulas), rather
#: than the graph being cut silently.
BACKWARD_NOT_IMPLEMENTED = frozenset({"unique", "unique_consecutive", "bincount", "histogram"})

#: Parameter names of factory functions that never hold a tensor to differentiate.
FACTORY_PARAMETERS = frozenset(
    {
        "size",
        "stride",
        "fill_value",
        "start",
        "end",
        "step",
        "steps",
        "base",
        "n",
        "m",
        "s",
        "low",
        "high",
        "dtype",
        "layout",
        "device",
        "requires_grad",
        "pin_memory",
        "memory_format",
        "generator",
    }
)


def is_factory(op):
    """A factory with no tensor argument: tagged ``"factory"``, every parameter in :data:`FACTORY_PARAMETERS`."""
    return "factory" in op.tags and set(op._call_signature.parameters) <= FACTORY_PARAMETERS


_REFUSED = "PyTorch refuses an input that requires grad here (not differentiable with respect to it)"

#: (op name, argument name) -> why that floating-point argument is not differentiated.
NONDIFF_ARGS: dict[tuple[str, str], str] = {
    ("binary_cross_entropy", "weight"): _REFUSED,
    ("binary_cross_entropy_with_logits", "weight"): _REFUSED,
    ("binary_cross_entropy_with_logits", "pos_weight"): _REFUSED,
    ("nll_loss", "weight"): _REFUSED,
    ("cross_entropy", "weight"): _REFUSED,
    ("multi_margin_loss", "weight"): _REFUSED,
    ("soft_margin_loss", "target"): _REFUSED,
    # PyTorch's backward raises NotImplementedError for these (ember's too: tests/test_special_grad.py)
    ("special_zeta", "input"): "PyTorch has no derivative of zeta in its first argument",
    ("special_gammainc", "input"): "PyTorch has no derivative of igamma in its first argument",
    ("special_gammaincc", "input"): "PyTorch has no derivative of igammac in its first argument",
}

_NO_SCATTER_REDUCE = "PyTorch has no derivative of scatter with reduce=; ember neither for 'multiply'"

#: (op name, sample name) -> why: samples where PyTorch defines no gradient at all (its backward raises),
#: and ember's raises too (``test_ops_grad.py`` checks that it does).
_QR_R_ONLY = "PyTorch: the derivative of linalg.qr depends on Q, which mode='r' does not compute"
_QR_COMPLETE = "PyTorch: QR is not differentiable when mode='complete' and nrows > ncols (Q's last columns are free)"

NO_GRADIENT_SAMPLES: dict[tuple[str, str], str] = {
    ("scatter", "multiply, repeated"): _NO_SCATTER_REDUCE,
    ("linalg_qr", "tall, mode r"): _QR_R_ONLY,
    ("linalg_qr", "wide, mode r"): _QR_R_ONLY,
    ("linalg_qr", "tall, complete"): _QR_COMPLETE,
    ("qr", "tall, complete"): _QR_COMPLETE,
}

#: The seed random ops are run with on every call of a :class:`GradCase`.
SEED = 1234


def is_differentiable_dtype(dtype):
    """Whether tensors of ``dtype`` can require grad (floating point and complex)."""
    return dtype.is_floating_point or dtype.is_complex


def _is_diff_tensor(value):
    return isinstance(value, ember.Tensor) and value.dtype in (ember.float64, ember.complex128)


def grad_dtypes(info):
    """The dtypes the gradient tests use for ``info``: float64 and complex128, where the op supports them."""
    return [d for d in (ember.float64, ember.complex128) if d in info.dtypes]


def _seed_of(*parts):
    return zlib.crc32("/".join(str(p) for p in parts).encode())


def random_like(t, seed):
    """A tensor of standard normal values (complex for complex ``t``) shaped like ``t``, from ``seed``."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(tuple(t.shape))
    if t.dtype.is_complex:
        values = values + 1j * rng.standard_normal(tuple(t.shape))
    return ember.tensor(np.asarray(values).astype(t.dtype.numpy_dtype), device=t.device)


class _Slot:
    """Where leaf number ``index`` goes back into the arguments."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


def _finite(t):
    return bool(np.isfinite(np.asarray(t.detach()._host_array())).all())


def flatten_outputs(result):
    """The tensors of an op's result (a tensor, or nested tuples/lists of them), in order."""
    if isinstance(result, ember.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in flatten_outputs(r)]
    return []


class GradCase:
    """One sample of one op as a function of its differentiable tensors.

    Attributes:
        info (OpInfo): the op's sample info.
        sample (SampleInput): the sample.
        leaves (list[Tensor]): fresh leaves requiring grad, one per distinct differentiable tensor.
        labels (list[str]): which argument each leaf is (``"tensors[1]"``).
        seed (int): what random ops are seeded with before each call.

    Args:
        constant (iterable[str]): further arguments (by parameter name) not to differentiate.
    """

    def __init__(self, info, sample, constant=()):
        self.info = info
        self.sample = sample
        self.seed = SEED
        op = info.op
        excluded = set(DERIVATIVES[op].nondiff_args) if op in DERIVATIVES else set()
        excluded.update(arg for (name, arg) in NONDIFF_ARGS if name == info.name)
        excluded.update(constant)
        # name the tensors by the op's parameters; leave out the excluded arguments
        bound = op._call_signature.bind(sample.input, *sample.args, **sample.kwargs)
        labels = {}

        def name_tensors(value, label):
            if _is_diff_tensor(value):
                labels.setdefault(id(value), label)
            elif isinstance(value, (list, tuple)):
                for i, v in enumerate(value):
                    name_tensors(v, f"{label}[{i}]")

        for name, value in bound.arguments.items():
            if name not in excluded:
                name_tensors(value, name)
        self.leaves = []
        self.labels = []
        slots = {}

        def template(value):
            if _is_diff_tensor(value) and id(value) in labels:
                key = id(value)
                if key not in slots:
                    slots[key] = _Slot(len(self.leaves))
                    self.leaves.append(value.detach().requires_grad_(True))
                    self.labels.append(labels[key])
                return slots[key]
            if isinstance(value, list):
                return [template(v) for v in value]
            if isinstance(value, tuple) and not hasattr(value, "_fields"):
                return tuple(template(v) for v in value)
            if isinstance(value, dict):
                return {k: template(v) for k, v in value.items()}
            return value

        self._template = (template(sample.input), template(tuple(sample.args)), template(dict(sample.kwargs)))
        self._random = "random" in op.tags

    def __repr__(self):
        return f"{self.info.name} {self.sample!r} w.r.t. {self.labels}"

    @staticmethod
    def _fill(value, leaves, convert=None):
        if isinstance(value, _Slot):
            return leaves[value.index]
        if isinstance(value, list):
            return [GradCase._fill(v, leaves, convert) for v in value]
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
            return tuple(GradCase._fill(v, leaves, convert) for v in value)
        if isinstance(value, dict):
            return {k: GradCase._fill(v, leaves, convert) for k, v in value.items()}
        return value if convert is None else convert(value)

    def arguments(self, leaves, convert=None):
        """``(input, args, kwargs)`` of the sample with ``leaves`` in place of the differentiable tensors.

        ``convert`` maps every other value (for calling PyTorch).
        """
        return self._fill(self._template, leaves, convert)

    def call(self, *leaves, op=None, first=None):
        """The op's raw result with ``leaves`` in place of the differentiable tensors.

        ``op`` calls another op with the same arguments (the in-place variant), and
        ``first`` replaces the first argument (the tensor an in-place op writes into).
        """
        input, args, kwargs = self.arguments(leaves)
        if first is not None:
            input = first
        if self._random:
            ember.manual_seed(self.seed)
        wrapper = self.info.gradcheck_wrapper
        if wrapper is not None and op is None:
            return wrapper(self.info.op, input, *args, **kwargs)
        return (op or self.info.op)(input, *args, **kwargs)

    def input_leaf(self):
        """The index of the leaf that is the op's first argument, or None when it is not differentiated."""
        first = self._template[0]
        return first.index if isinstance(first, _Slot) else None

    def fn(self, *leaves):
        """The op's floating-point/complex outputs (a tuple), for gradcheck."""
        return tuple(o for o in flatten_outputs(self.call(*leaves)) if is_differentiable_dtype(o.dtype))

    def outputs(self):
        """Every tensor output of the op on the leaves (differentiable or not), with grad recorded."""
        return flatten_outputs(self.call(*self.leaves))

    def is_usable(self):
        """Whether this sample is used by the gradient tests (see the module docstring)."""
        if not self.leaves or not all(_finite(t) for t in self.leaves):
            return False
        with ember.no_grad():
            outs = self.fn(*self.leaves)
        return all(_finite(o) for o in outs)

    def numel(self):
        """The number of elements of all leaves."""
        return sum(t.numel() for t in self.leaves)

    def grad_outputs(self, outputs, salt=""):
        """Seeded random gradients for the differentiable ``outputs`` (reproducible per op and sample)."""
        return [random_like(o, _seed_of(self.info.name, self.sample.name, salt, i)) for i, o in enumerate(outputs)]


def grad_cases(info, dtype, device="cpu", limit=None, constant=None):
    """The usable :class:`GradCase` of ``info``'s samples at ``dtype`` (at most ``limit``).

    ``constant(sample)``, when given, names the arguments of that sample not to differentiate.
    """
    cases = []
    for sample in info.sample_inputs(info, device, dtype, False):
        if (info.name, sample.name) in NO_GRADIENT_SAMPLES:
            continue
        case = GradCase(info, sample, constant(sample) if constant is not None else ())
        if case.is_usable():
            cases.append(case)
            if limit is not None and len(cases) >= limit:
                break
    return cases
