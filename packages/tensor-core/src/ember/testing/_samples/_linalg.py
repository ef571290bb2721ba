"""Matrices for the ``ember.linalg`` samples: general, well-conditioned, Hermitian positive-definite,
singular and ill-conditioned, in any dtype and batch shape, and the gradient-test wrappers."""

from __future__ import annotations

import numpy as np

from ... import _dtype as D
from .._opinfo import ErrorInput, SampleInput

#: The dtypes LAPACK takes.
LINALG_TYPES = (D.float32, D.float64, D.complex64, D.complex128)
#: Tolerances of the single-precision results (LAPACK's rounding differs with the blocking).
SINGLE_TOL = {D.float32: (1e-4, 1e-4), D.complex64: (1e-4, 1e-4)}


def _random(rng, shape, dtype):
    values = rng.uniform(-1, 1, size=shape)
    if dtype.is_complex:
        values = values + 1j * rng.uniform(-1, 1, size=shape)
    return values


def _shaped(fn, batch, n, rng, dtype):
    """``fn(rng, n, dtype)`` for each matrix of ``batch``, stacked."""
    count = int(np.prod(batch)) if batch else 1
    mats = [fn(rng, n, dtype) for _ in range(count)]
    return np.stack(mats).reshape(*batch, n, n) if mats else np.zeros((*batch, n, n))


def well_conditioned(rng, n, dtype):
    return _random(rng, (n, n), dtype) + n * np.eye(n) * (1 if rng.uniform() > 0.5 else -1)


def general(rng, n, dtype):
    return _random(rng, (n, n), dtype) * 2


def hermitian_pd(rng, n, dtype):
    a = _random(rng, (n, n), dtype)
    return a @ a.conj().T + n * np.eye(n)


def hermitian(rng, n, dtype):
    a = _random(rng, (n, n), dtype)
    return a + a.conj().T


def singular(rng, n, dtype):
    """Rank ``n - 1``."""
    if n == 0:
        return np.zeros((0, 0))
    return _random(rng, (n, n - 1), dtype) @ _random(rng, (n - 1, n), dtype)


def ill_conditioned(rng, n, dtype, cond=1e4):
    q1, _ = np.linalg.qr(_random(rng, (n, n), dtype))
    q2, _ = np.linalg.qr(_random(rng, (n, n), dtype))
    return (q1 * np.logspace(0, -np.log10(cond), n)) @ q2


def matrices(kind, batch, n, device, dtype, requires_grad, seed=0):
    """A tensor of ``batch`` matrices ``n x n`` of ``kind`` (a function above)."""
    import ember

    rng = np.random.default_rng(seed)
    array = np.asarray(_shaped(kind, tuple(batch), n, rng, dtype)).astype(dtype.numpy_dtype)
    return ember.tensor(array, device=device, requires_grad=requires_grad and dtype.category >= D.FLOATING)


def rectangular(shape, device, dtype, requires_grad, seed=0):
    import ember

    rng = np.random.default_rng(seed)
    array = _random(rng, tuple(shape), dtype).astype(dtype.numpy_dtype)
    return ember.tensor(array, device=device, requires_grad=requires_grad)


def errors(*cases):
    """Error inputs from ``(callable making the sample, error type, regex)`` cases."""

    def gen(opinfo, device):
        import ember

        def t(*shape, dtype=ember.float32):
            return ember.ones(shape, dtype=dtype, device=device)

        for make_sample, error, regex in cases:
            yield ErrorInput(make_sample(t, ember), error, regex)

    return gen


def square_samples(kinds, extra=lambda make: ()):
    """Samples of one square-matrix argument: ``kinds`` is ``[(kind, batch, n, name), ...]``."""

    def gen(opinfo, device, dtype, requires_grad):
        for i, (kind, batch, n, name) in enumerate(kinds):
            yield SampleInput(matrices(kind, batch, n, device, dtype, requires_grad, seed=i), name=name)
        yield from extra(lambda kind, batch, n, seed=0: matrices(kind, batch, n, device, dtype, requires_grad, seed))

    return gen


def mH(t):
    """The conjugate transpose, written with methods ember's and PyTorch's tensors share."""
    return t.transpose(-2, -1).conj()


def hermitian_wrapper(op, A, *args, **kwargs):
    """Gradient tests of ops that read one triangle of a Hermitian input: differentiate through
    ``(A + A^H) / 2``, so finite differences perturb Hermitian matrices, as PyTorch's OpInfos do."""
    return op((A + mH(A)) / 2, *args, **kwargs)
