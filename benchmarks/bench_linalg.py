"""ember.linalg against PyTorch: the workloads issue 20 names, on the CPU and (``--device cuda``) the GPU.

* ``linalg_solve_64x64x64``: ``linalg.solve`` of a batch of 64 well-conditioned 64x64 float32 systems,
  8 right-hand sides each;
* ``linalg_cholesky_256``: ``linalg.cholesky`` of a 256x256 symmetric positive-definite matrix;
* ``linalg_svd_256``: ``linalg.svd(full_matrices=False)`` of a 256x256 matrix;
* ``linalg_eigh_256``: ``linalg.eigh`` of a 256x256 symmetric matrix with eigenvalues 1, 2, ..., 256 (a random
  orthogonal basis): well-separated eigenvalues, so that the float32 gradient, whose terms carry
  ``1 / (lambda_i - lambda_j)``, is defined to float32 accuracy by the matrix and not by the solver (a
  random symmetric matrix has gaps near 0.02 at a norm near 45, where cuSOLVER's and PyTorch's float32
  eigenvectors gave gradients 34% apart);
* ``linalg_det_64x64x64``: ``linalg.det`` of a batch of 64 64x64 matrices (``I + 0.1 N``: no overflow).

Each has a forward row and a ``_fwd_bwd`` row: the op, then the inputs' gradients through
``autograd.grad`` for fixed output gradients (for ``svd``/``eigh``, of gauge-invariant functions of
the vectors: ``U @ Vh`` and ``|V|``, so that both libraries define the same loss). Target: at most 1.3x
PyTorch's time. Each setup checks once that both libraries give the same values before timing. The
``cuda_linalg_*`` rows run the same work on the GPU, synchronising after each call.
"""

from __future__ import annotations

import numpy as np
from harness import Skip, Workload, import_torch


def _solve(lib, A, B):
    return lib.linalg.solve(A, B)


def _cholesky(lib, A):
    return lib.linalg.cholesky(A)


def _svd(lib, A):
    U, S, Vh = lib.linalg.svd(A, full_matrices=False)
    return S, U @ Vh


def _eigh(lib, A):
    L, V = lib.linalg.eigh(A)
    return L, V.abs()


def _det(lib, A):
    return lib.linalg.det(A)


def _inputs(name, rng):
    """The float32 inputs of each workload (numpy), built once and shared by both libraries."""
    if name == "solve":
        A = rng.standard_normal((64, 64, 64)) + 16 * np.eye(64)
        return [A, rng.standard_normal((64, 64, 8))]
    if name == "cholesky":
        a = rng.standard_normal((256, 256))
        return [a @ a.T + 256 * np.eye(256)]
    if name == "svd":
        return [rng.standard_normal((256, 256))]
    if name == "eigh":
        q, _ = np.linalg.qr(rng.standard_normal((256, 256)))
        return [(q * np.arange(1.0, 257.0)) @ q.T]
    return [np.eye(64) + 0.1 * rng.standard_normal((64, 64, 64))]


_OPS = {"solve": _solve, "cholesky": _cholesky, "svd": _svd, "eigh": _eigh, "det": _det}


def _outputs(result):
    return result if isinstance(result, tuple) else (result,)


def _callable(lib, name, arrays, backward, device, sync, dtype=np.float32):
    op = _OPS[name]
    tensors = [lib.from_numpy(a.astype(dtype)).to(device) for a in arrays]
    if name == "cholesky" and backward:
        # the gradient with respect to a symmetric input, as the op reads one triangle
        leaves = [t.requires_grad_(True) for t in tensors]

        def fn():
            (a,) = leaves
            return op(lib, (a + a.transpose(-2, -1)) / 2)
    else:
        leaves = [t.requires_grad_(backward) for t in tensors]

        def fn():
            return op(lib, *leaves)

    if not backward:
        def forward():
            out = fn()
            sync()
            return _outputs(out)[0]

        return forward
    rng = np.random.default_rng(1)
    grads = [lib.from_numpy(rng.standard_normal(tuple(o.shape)).astype(dtype)).to(device)
             for o in _outputs(fn())]

    def forward_backward():
        outs = _outputs(fn())
        result = lib.autograd.grad(list(outs), leaves, grads)
        sync()
        return result[0]

    return forward_backward


def _setup(name, backward, device):
    def setup():
        import ember

        if device == "cuda" and not ember.cuda.is_available():
            raise Skip("no CUDA device")
        arrays = _inputs(name, np.random.default_rng(0))
        ember_sync = ember.cuda.synchronize if device == "cuda" else (lambda: None)
        ember_fn = _callable(ember, name, arrays, backward, device, ember_sync)
        torch = import_torch()
        torch_fn = None
        if torch is not None and (device == "cpu" or torch.cuda.is_available()):
            torch_sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
            torch_fn = _callable(torch, name, arrays, backward, device, torch_sync)
            ours, theirs = ember_fn().detach().cpu().numpy(), torch_fn().detach().cpu().numpy()
            scale = max(1.0, float(np.abs(theirs).max()))
            try:
                np.testing.assert_allclose(ours, theirs, rtol=2e-3, atol=2e-3 * scale)
            except AssertionError as exc:
                # float32 results of two libraries can differ by more than either differs from the truth (the
                # eigenvector gradients, amplified by 1 / (λi - λj)): judge both against PyTorch's float64
                # result on the CPU, and fail only when ember is the one further off
                exact = _callable(torch, name, arrays, backward, "cpu", lambda: None, np.float64)()
                exact = exact.detach().numpy()
                ours_off, theirs_off = np.abs(ours - exact).max(), np.abs(theirs - exact).max()
                if ours_off > max(theirs_off, 2e-3 * scale):
                    raise AssertionError(f"{exc}\nlargest difference from PyTorch's float64 CPU result: ember "
                                         f"{ours_off:.3g}, PyTorch {theirs_off:.3g} (scale {scale:.3g})") from None
        return ember_fn, torch_fn

    return setup


_CASES = [
    ("solve", "linalg_solve_64x64x64", "linalg.solve, 64 float32 systems 64x64 with 8 right-hand sides"),
    ("cholesky", "linalg_cholesky_256", "linalg.cholesky of a 256x256 float32 SPD matrix"),
    ("svd", "linalg_svd_256", "linalg.svd(full_matrices=False) of a 256x256 float32 matrix"),
    ("eigh", "linalg_eigh_256", "linalg.eigh of a 256x256 float32 symmetric matrix"),
    ("det", "linalg_det_64x64x64", "linalg.det of 64 float32 64x64 matrices"),
]

WORKLOADS = []
for _op, _name, _description in _CASES:
    for _device, _prefix in (("cpu", ""), ("cuda", "cuda_")):
        WORKLOADS.append(Workload(f"{_prefix}{_name}", _setup(_op, False, _device), device=_device,
                                  description=_description))
        WORKLOADS.append(Workload(f"{_prefix}{_name}_fwd_bwd", _setup(_op, True, _device), device=_device,
                                  description=f"{_description}, then the inputs' gradients (autograd.grad)"))
