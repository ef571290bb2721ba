"""Samplers of the distributions that ``ember.distributions`` draws from beyond uniforms and normals:
``_standard_gamma`` (with its reparameterisation gradient ``_standard_gamma_grad``), ``poisson`` and
``binomial``, as in PyTorch.

CPU kernels draw in float64 from the numpy ``Generator`` of the ember generator (the default one when
``generator`` is omitted), as :mod:`ember._ops.random` does, and convert to the input's dtype. CUDA
kernels draw on the GPU with ``cupy.random``, seeded by one 63-bit key taken from the GPU's ember
generator (so ``ember.manual_seed`` reproduces them); their values differ from the CPU's.

The gamma gradient is the implicit reparameterisation gradient (Figurnov, Mohamed and Mnih, "Implicit
Reparameterization Gradients", NeurIPS 2018): for a sample ``x`` of Gamma(alpha, 1),
``dx/dalpha = -(dF/dalpha)(x; alpha) / f(x; alpha)``, with ``F`` the regularised lower incomplete gamma
function (the CDF) and ``f`` the density. ``dF/dalpha`` is a central difference of ``F`` in ``alpha``
(taken on whichever of ``P`` and ``Q = 1 - P`` is the smaller, so that tails keep their relative
precision); its relative error is about 1e-8 in float64, far below the sampling noise the gradient serves.
"""

from __future__ import annotations

import numpy as np

from .._meta import MetaArray
from ._registry import defop
from .random import _check_generator, _check_tensor, _numpy_rng

__all__ = []  # ops are exported by ember/__init__.py from the registry

#: No Tensor methods (PyTorch has none for these samplers).
METHODS = []

_RANDOM = ("random",)


def _check_float(op, name, tensor):
    if not tensor.dtype.is_floating_point:
        raise RuntimeError(f"\"{op}\" not implemented for '{tensor.dtype}': {name} must be floating point")


def _tiny(np_dtype):
    return np.finfo(np_dtype).tiny


# -- CUDA: cupy.random seeded from the ember generator --------------------------------------------------


def _cupy_state(tensor, generator):
    """A ``cupy.random.RandomState`` seeded by a key drawn from ``generator`` (the tensor's GPU's default
    generator when None), on that GPU."""
    from ..cuda._runtime import cupy_module
    from ..cuda.random import generator_for

    cp = cupy_module()
    if generator is None:
        generator = generator_for(tensor._device.index)
    seed = int(generator._rng.integers(0, 2**63))
    return cp, cp.random.RandomState(seed)


# -- _standard_gamma --------------------------------------------------------------------------------------


def _standard_gamma_meta(input, generator=None):
    """Samples of Gamma(``input``, 1), one per element (the concentrations ``alpha > 0``).

    Samples are clamped below to the dtype's smallest normal number (small concentrations put much
    mass below it), as in PyTorch. Its gradient in ``input`` is the implicit reparameterisation
    gradient (:func:`ember._standard_gamma_grad`).

    Args:
        input (Tensor): concentrations, floating point, any shape.
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).

    Returns:
        Tensor: samples of ``input``'s shape and dtype.

    Raises:
        RuntimeError: if ``input`` is not floating point, or (on the values) a concentration is not > 0.

    Example:
        >>> import ember
        >>> g = ember.Generator().manual_seed(0)
        >>> bool((ember._standard_gamma(ember.ones(3), generator=g) > 0).all())
        True
    """
    _check_tensor("_standard_gamma", "input", input)
    _check_float("_standard_gamma", "input", input)
    _check_generator("_standard_gamma", generator, input.device)
    return MetaArray(input._data.shape, input._data.dtype)


def _check_positive(op, xp, alpha):
    if alpha.size and not bool((alpha > 0).all()):
        raise RuntimeError(f"{op}: expected every concentration to be > 0, found {float(alpha[~(alpha > 0)][0])}")


def _standard_gamma_cpu(input, generator=None):
    alpha = input._data.astype(np.float64)
    _check_positive("_standard_gamma", np, alpha)
    x = _numpy_rng(generator).standard_gamma(alpha)
    dtype = input._data.dtype
    return np.maximum(x, _tiny(dtype)).astype(dtype)


def _standard_gamma_cuda(input, generator=None):
    cp, state = _cupy_state(input, generator)
    with cp.cuda.Device(input._device.index):
        alpha = input._data.astype(cp.float64)
        _check_positive("_standard_gamma", cp, alpha)
        x = state.standard_gamma(alpha) if alpha.size else cp.empty(alpha.shape)
        dtype = input._data.dtype
        return cp.maximum(x, _tiny(dtype)).astype(dtype)


_standard_gamma = defop("_standard_gamma", _standard_gamma_meta, cpu=_standard_gamma_cpu, tags=_RANDOM)
_standard_gamma.register_kernel("cuda", _standard_gamma_cuda)


# -- _standard_gamma_grad ----------------------------------------------------------------------------------


def _standard_gamma_grad_meta(self, output):
    """d output / d self for samples ``output`` of Gamma(``self``, 1): the implicit reparameterisation
    gradient ``-(dF/dalpha)(x; alpha) / f(x; alpha)`` (Figurnov et al., 2018).

    Args:
        self (Tensor): the concentrations ``alpha``, floating point.
        output (Tensor): the samples ``x`` drawn from them, same shape.

    Returns:
        Tensor: the derivatives, of the broadcast shape and ``self``'s dtype.

    Raises:
        RuntimeError: if the tensors are not floating point or their shapes don't broadcast.
    """
    _check_tensor("_standard_gamma_grad", "self", self)
    _check_tensor("_standard_gamma_grad", "output", output)
    _check_float("_standard_gamma_grad", "self", self)
    from ._shapes import broadcast_shapes

    shape = broadcast_shapes(tuple(self._data.shape), tuple(output._data.shape))
    return MetaArray(shape, self._data.dtype)


def _gamma_sample_grad(xp, special, alpha, x):
    """The implicit gradient on float64 arrays (numpy with scipy.special, or CuPy with cupyx's)."""
    h = 1e-5 * xp.maximum(alpha, 1e-3)
    h = xp.minimum(h, 0.5 * alpha)  # keep alpha - h > 0
    lower = special.gammainc(alpha, x)
    use_upper = lower > 0.5
    fwd = xp.where(use_upper, -special.gammaincc(alpha + h, x), special.gammainc(alpha + h, x))
    bwd = xp.where(use_upper, -special.gammaincc(alpha - h, x), special.gammainc(alpha - h, x))
    dcdf = (fwd - bwd) / (2 * h)
    log_pdf = (alpha - 1) * xp.log(x) - x - special.gammaln(alpha)
    return -dcdf * xp.exp(-log_pdf)


def _standard_gamma_grad_cpu(self, output):
    import scipy.special

    alpha, x = np.broadcast_arrays(self._data.astype(np.float64), output._data.astype(np.float64))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        grad = _gamma_sample_grad(np, scipy.special, alpha, x)
    return grad.astype(self._data.dtype)


def _standard_gamma_grad_cuda(self, output):
    from cupyx.scipy import special

    from ..cuda._runtime import cupy_module

    cp = cupy_module()
    with cp.cuda.Device(self._device.index):
        alpha, x = cp.broadcast_arrays(self._data.astype(cp.float64), output._data.astype(cp.float64))
        return _gamma_sample_grad(cp, special, alpha, x).astype(self._data.dtype)


_standard_gamma_grad = defop("_standard_gamma_grad", _standard_gamma_grad_meta, cpu=_standard_gamma_grad_cpu)
_standard_gamma_grad.register_kernel("cuda", _standard_gamma_grad_cuda)


# -- poisson -----------------------------------------------------------------------------------------------


def _poisson_meta(input, generator=None):
    """Samples of Poisson(``input``), one per element (the rates ``lambda >= 0``).

    Args:
        input (Tensor): rates, floating point, any shape.
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).

    Returns:
        Tensor: counts as floats, of ``input``'s shape and dtype.

    Raises:
        RuntimeError: if ``input`` is not floating point, or (on the values) a rate is negative or nan.

    Example:
        >>> import ember
        >>> g = ember.Generator().manual_seed(0)
        >>> ember.poisson(ember.zeros(3), generator=g).tolist()
        [0.0, 0.0, 0.0]
    """
    _check_tensor("poisson", "input", input)
    _check_float("poisson", "input", input)
    _check_generator("poisson", generator, input.device)
    return MetaArray(input._data.shape, input._data.dtype)


def _check_rates(xp, lam):
    if lam.size and not bool((lam >= 0).all()):
        raise RuntimeError(
            f"poisson: invalid Poisson rate, expected rate to be non-negative, got {lam[~(lam >= 0)][0]}"
        )


def _poisson_cpu(input, generator=None):
    lam = input._data.astype(np.float64)
    _check_rates(np, lam)
    return _numpy_rng(generator).poisson(lam).astype(input._data.dtype)


def _poisson_cuda(input, generator=None):
    cp, state = _cupy_state(input, generator)
    with cp.cuda.Device(input._device.index):
        lam = input._data.astype(cp.float64)
        _check_rates(cp, lam)
        out = state.poisson(lam) if lam.size else cp.empty(lam.shape)
        return out.astype(input._data.dtype)


poisson = defop("poisson", _poisson_meta, cpu=_poisson_cpu, tags=_RANDOM)
poisson.register_kernel("cuda", _poisson_cuda)


# -- binomial ----------------------------------------------------------------------------------------------


def _binomial_meta(count, prob, generator=None):
    """Samples of Binomial(``count``, ``prob``): successes in ``count`` trials of probability ``prob``.

    Args:
        count (Tensor): numbers of trials (whole numbers >= 0), floating point.
        prob (Tensor): success probabilities in [0, 1], same dtype; broadcasts with ``count``.
        generator (ember.Generator, optional): where to draw from (the default generator if omitted).

    Returns:
        Tensor: counts as floats, of the broadcast shape and ``count``'s dtype.

    Raises:
        RuntimeError: if the tensors are not floating point, their dtypes differ or the shapes don't
            broadcast; on the values: a negative count or a probability outside [0, 1].

    Example:
        >>> import ember
        >>> g = ember.Generator().manual_seed(0)
        >>> ember.binomial(ember.tensor([5.0, 3.0]), ember.tensor([1.0, 0.0]), generator=g).tolist()
        [5.0, 0.0]
    """
    _check_tensor("binomial", "count", count)
    _check_tensor("binomial", "prob", prob)
    _check_float("binomial", "count", count)
    if count.dtype != prob.dtype:
        raise RuntimeError(f"binomial: expected count and prob of one dtype, got {count.dtype} and {prob.dtype}")
    _check_generator("binomial", generator, count.device)
    from ._shapes import broadcast_shapes

    shape = broadcast_shapes(tuple(count._data.shape), tuple(prob._data.shape))
    return MetaArray(shape, count._data.dtype)


def _binomial_arrays(xp, count, prob):
    n, p = xp.broadcast_arrays(count._data.astype(xp.float64), prob._data.astype(xp.float64))
    if n.size and not bool((n >= 0).all()):
        raise RuntimeError("binomial: expected every count to be >= 0")
    if p.size and not bool(((p >= 0) & (p <= 1)).all()):
        raise RuntimeError("binomial: expected every probability to be in [0, 1]")
    return n.astype(xp.int64), p


def _binomial_cpu(count, prob, generator=None):
    n, p = _binomial_arrays(np, count, prob)
    return _numpy_rng(generator).binomial(n, p).astype(count._data.dtype)


def _binomial_cuda(count, prob, generator=None):
    cp, state = _cupy_state(count, generator)
    with cp.cuda.Device(count._device.index):
        n, p = _binomial_arrays(cp, count, prob)
        out = state.binomial(n, p) if n.size else cp.empty(n.shape)
        return out.astype(count._data.dtype)


binomial = defop("binomial", _binomial_meta, cpu=_binomial_cpu, tags=_RANDOM)
binomial.register_kernel("cuda", _binomial_cuda)
