"""Adam (and AdamW through ``decoupled_weight_decay``), with the AMSGrad variant.

References: Kingma & Ba, "Adam: A Method for Stochastic Optimization" (ICLR 2015);
Reddi et al., "On the Convergence of Adam and Beyond" (ICLR 2018, AMSGrad);
Loshchilov & Hutter, "Decoupled Weight Decay Regularization" (ICLR 2019, AdamW).
PyTorch's ``torch.optim.Adam``.
"""

from __future__ import annotations

import numpy as np

import ember
from ember import _C
from ember._dtype import numpy_dtype_name
from ember._ops._dispatch import ops_intercepted
from ember._ops._dispatch import state as _dispatch_state
from ember._tensor import Tensor

from .optimizer import (
    Optimizer,
    _as_real,
    _check_adam_family_args,
    _check_fused,
    _default_to_fused,
    _evaluate_closure,
    _foreach_supported,
    _get_value,
    _lr_value,
    _pick_step,
    _resolve_foreach,
    _to_scalar,
    _use_grad_for_differentiable,
)

__all__ = ["Adam", "adam"]


class Adam(Optimizer):
    r"""Adam, PyTorch's ``torch.optim.Adam``.

    Per step ``t`` (from 1), for each parameter with gradient ``g`` (negated when ``maximize``)::

        theta = theta * (1 - lr * weight_decay)      (decoupled_weight_decay)
        g = g + weight_decay * theta                 (otherwise, if weight_decay != 0)
        m = beta1 * m + (1 - beta1) * g              (computed as m.lerp_(g, 1 - beta1))
        v = beta2 * v + (1 - beta2) * g * g          (computed as v.lerp_(g * g, 1 - beta2))
        v_max = max(v_max, v)                        (amsgrad; used instead of v below)
        theta = theta - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)
                                                     (computed as theta - lr * c / (1 - beta1**t) * m
                                                      / (sqrt(v) + eps * c), c = sqrt(1 - beta2**t))

    State per parameter: ``"step"`` (a 0-d float tensor, float64 when that is the default dtype,
    as in PyTorch 2.x), ``"exp_avg"``, ``"exp_avg_sq"`` and, with amsgrad, ``"max_exp_avg_sq"``.

    Args:
        params (iterable): tensors or parameter-group dicts.
        lr (float, default 1e-3): learning rate.
        betas (tuple[float, float], default (0.9, 0.999)): decay rates of the two moments.
        eps (float, default 1e-8): added to the denominator.
        weight_decay (float, default 0): L2 penalty (or decoupled decay, see below).
        amsgrad (bool, default False): use the AMSGrad variant.
        foreach (bool, optional): run the multi-tensor path (``ember._foreach_*`` list ops; same results).
            None (default): the fused step for plain CPU float/complex tensors and for plain CUDA floating tensors,
            else the foreach path for plain tensors, without ``differentiable`` (see ``fused``).
        maximize (bool, default False): maximize the objective.
        capturable (bool, default False): accepted for compatibility (no CUDA graphs in ember).
        differentiable (bool, default False): run the step with autograd enabled, recording the update
            (to differentiate through unrolled steps, and for ``lr``, when it is a tensor that requires
            grad); parameters may then be non-leaf tensors.
        fused (bool, optional): run the fused step (``ember._C.fused_adam_``: one vectorized C++ pass per
            parameter, huge parameters split over the threads; the single-tensor loop's results within an ulp
            or two) on float32/float64 (and complex, viewed as real) contiguous CPU tensors; other tensors take
            the single-tensor loop. On CUDA, float16/bfloat16/float32/float64 (and complex) contiguous tensors take
            ``ember.cuda.kernels.optim_kernels.fused_adam_``: one kernel launch per 64 parameters of a group,
            computing in float32 (float64 for float64), results within float rounding of the single-tensor loop.
            None (default): fused when every parameter suits it (all CPU or all CUDA) and neither ``foreach``
            nor ``differentiable`` is set (it measured fastest, see ``_FUSED_BY_DEFAULT``).
        decoupled_weight_decay (bool, default False): AdamW's decoupled weight decay.

    Raises:
        ValueError: a negative ``lr``, ``eps`` or ``weight_decay``, a beta outside ``[0, 1)``,
            betas of mixed types, a tensor ``lr``/beta with more than one element.
        RuntimeError: ``fused=True`` with ``differentiable=True`` or ``foreach=True`` (PyTorch's messages).
    """

    def __init__(
        self,
        params,
        lr: float | Tensor = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ) -> None:
        _check_adam_args(lr, betas, eps, weight_decay, foreach, capturable)
        betas = tuple(map(_to_scalar, betas))
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "amsgrad": amsgrad,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
            "fused": fused,
            "decoupled_weight_decay": decoupled_weight_decay,
        }
        _check_fused(fused, foreach, differentiable, supported=True)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        self._upgrade_loaded_state(
            {
                "amsgrad": False,
                "maximize": False,
                "foreach": None,
                "capturable": False,
                "differentiable": False,
                "decoupled_weight_decay": False,
                "fused": None,
            }
        )

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform a single optimization step.

        Args:
            closure (Callable, optional): re-evaluates the model and returns the loss.

        Returns:
            The closure's loss, or ``None``.
        """
        loss = _evaluate_closure(closure)

        for group in self.param_groups:
            amsgrad = group["amsgrad"]
            buffers = ["exp_avg", "exp_avg_sq", "max_exp_avg_sq"] if amsgrad else ["exp_avg", "exp_avg_sq"]
            # float32 steps for fused=True, as PyTorch's fused steps keep them
            step_dtype = ember.float32 if group["fused"] else None
            params, grads, state = self._gather_state(group, buffers, step_dtype=step_dtype)
            beta1, beta2 = group["betas"]
            adam(
                params,
                grads,
                state["exp_avg"],
                state["exp_avg_sq"],
                state.get("max_exp_avg_sq", []),
                state["step"],
                amsgrad=amsgrad,
                beta1=beta1,
                beta2=beta2,
                lr=group["lr"],
                weight_decay=group["weight_decay"],
                eps=group["eps"],
                maximize=group["maximize"],
                decoupled_weight_decay=group["decoupled_weight_decay"],
                foreach=group["foreach"],
                differentiable=group["differentiable"],
                fused=group["fused"],
            )
        return loss


def _check_adam_args(lr, betas, eps, weight_decay, foreach, capturable):
    """The argument checks shared by :class:`Adam` and :class:`~ember.optim.AdamW`, with PyTorch's messages."""
    if isinstance(lr, Tensor) and foreach and not capturable:
        raise ValueError("lr as a Tensor is not supported for capturable=False and foreach=True")
    _check_adam_family_args(lr, betas, eps, weight_decay)
    if not (
        (isinstance(betas[0], float) and isinstance(betas[1], float))
        or (isinstance(betas[0], Tensor) and isinstance(betas[1], Tensor))
    ):
        raise ValueError("betas must be either both floats or both Tensors")
    for i in (0, 1):
        if isinstance(betas[i], Tensor):
            if not capturable and foreach:
                raise ValueError(f"betas[{i}] as a Tensor is not supported for capturable=False and foreach=True")
            if betas[i].numel() != 1:
                raise ValueError(f"Tensor betas[{i}] must be 1-element")


def adam(
    params,
    grads,
    exp_avgs,
    exp_avg_sqs,
    max_exp_avg_sqs,
    state_steps,
    foreach=None,
    capturable=False,
    differentiable=False,
    fused=None,
    grad_scale=None,
    found_inf=None,
    has_complex=False,
    decoupled_weight_decay=False,
    *,
    amsgrad,
    beta1,
    beta2,
    lr,
    weight_decay,
    eps,
    maximize,
):
    """Functional Adam (PyTorch's ``torch.optim.adam.adam``); see :class:`Adam`.

    Updates ``params``, the moment tensors and the ``state_steps`` tensors in place: with the fused
    kernel when ``fused``, the multi-tensor path when ``foreach``, else the single-tensor loop; with both
    None, :func:`_default_impl` picks. ``capturable`` and ``has_complex`` are accepted for PyTorch's signature.

    Raises:
        RuntimeError: ``fused=True`` with ``foreach=True`` or ``differentiable=True``; ``grad_scale``/``found_inf``
            given (ember has no gradient scaler).
        AssertionError: ``foreach=True`` with ``differentiable=True``.
    """
    _check_fused(fused, foreach, differentiable, supported=True)
    if grad_scale is not None or found_inf is not None:
        raise RuntimeError("grad_scale and found_inf are not supported by ember's Adam (ember has no GradScaler)")
    if fused:
        impl = _fused_adam
    elif fused is None and foreach is None:
        impl = _default_impl(params, differentiable)
    else:
        impl = _pick_step(foreach, differentiable, params, _single_tensor_adam, _multi_tensor_adam)
    impl(
        params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, amsgrad=amsgrad, beta1=beta1,
        beta2=beta2, lr=lr, weight_decay=weight_decay, eps=eps, maximize=maximize,
        decoupled_weight_decay=decoupled_weight_decay, differentiable=differentiable,
    )


def _single_tensor_adam(
    params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, amsgrad, beta1, beta2, lr,
    weight_decay, eps, maximize, decoupled_weight_decay, differentiable,
):
    lr, beta1, beta2 = _lr_value(lr, differentiable), _to_scalar(beta1), _to_scalar(beta2)
    for i, param in enumerate(params):
        grad = grads[i] if not maximize else -grads[i]
        exp_avg = exp_avgs[i]
        exp_avg_sq = exp_avg_sqs[i]
        step_t = state_steps[i]

        step_t.add_(1)

        if weight_decay != 0:
            if decoupled_weight_decay:
                param.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(param, alpha=weight_decay)

        max_exp_avg_sq = max_exp_avg_sqs[i] if amsgrad else None
        if param.is_complex():
            grad = ember.view_as_real(grad)
            exp_avg = ember.view_as_real(exp_avg)
            exp_avg_sq = ember.view_as_real(exp_avg_sq)
            if amsgrad:
                max_exp_avg_sq = ember.view_as_real(max_exp_avg_sq)
            param = ember.view_as_real(param)

        # Few full passes over the tensors, none through a temporary that an out-of-place op can avoid:
        # v.lerp_(g * g, 1 - beta2) is beta2 * v + (1 - beta2) * g * g in one in-place op, and
        # m / (sqrt(v) / sqrt(bc2) + eps) is folded to sqrt(bc2) * m / (sqrt(v) + eps * sqrt(bc2)),
        # so the denominator is one sqrt and one out-of-place add (no division, no in-place copy).
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.lerp_(grad.square(), 1 - beta2)

        step_size, eps_term = _step_scalars(_get_value(step_t), lr, beta1, beta2, eps)

        if amsgrad:
            if differentiable:  # maximum's node keeps its inputs, which this copy_ and later lerp_s overwrite
                max_exp_avg_sq.copy_(ember.maximum(max_exp_avg_sq.clone(), exp_avg_sq.clone()))
            else:
                max_exp_avg_sq.copy_(ember.maximum(max_exp_avg_sq, exp_avg_sq))
            denom = max_exp_avg_sq.sqrt() + eps_term
        else:
            denom = exp_avg_sq.sqrt() + eps_term

        # differentiable: addcdiv's node keeps exp_avg, which the next step's lerp_ overwrites
        if isinstance(step_size, Tensor):  # differentiable, with a gradient for lr
            param.addcmul_(exp_avg.clone() / denom, step_size, value=-1)
        else:
            param.addcdiv_(exp_avg.clone() if differentiable else exp_avg, denom, value=-step_size)


def _step_scalars(step, lr, beta1, beta2, eps):
    """(step size, eps term) of step ``step``: ``lr * sqrt(1 - beta2**t) / (1 - beta1**t)`` and
    ``eps * sqrt(1 - beta2**t)``, Python floats (both paths compute them alike: the same bits)."""
    bias_correction1 = 1 - beta1**step
    bias_correction2_sqrt = (1 - beta2**step) ** 0.5
    return lr / bias_correction1 * bias_correction2_sqrt, eps * bias_correction2_sqrt


def _multi_tensor_adam(
    params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, amsgrad, beta1, beta2, lr,
    weight_decay, eps, maximize, decoupled_weight_decay, differentiable,
):
    """The single-tensor loop's ops, one list op at a time over all parameters (the same bits)."""
    if differentiable:
        raise AssertionError("_foreach ops don't support autograd")
    if len(params) == 0:
        return
    lr, beta1, beta2 = _to_scalar(lr), _to_scalar(beta1), _to_scalar(beta2)
    params, grads, exp_avgs, exp_avg_sqs = _as_real(params), _as_real(grads), _as_real(exp_avgs), _as_real(exp_avg_sqs)
    if amsgrad:
        max_exp_avg_sqs = _as_real(max_exp_avg_sqs)
    if maximize:
        grads = ember._foreach_neg(grads)

    ember._foreach_add_(state_steps, 1)

    if weight_decay != 0:
        if decoupled_weight_decay:
            ember._foreach_mul_(params, 1 - lr * weight_decay)
        else:
            grads = ember._foreach_add(grads, params, alpha=weight_decay)

    ember._foreach_lerp_(exp_avgs, grads, 1 - beta1)
    ember._foreach_lerp_(exp_avg_sqs, [g.square() for g in grads], 1 - beta2)

    scalars = [_step_scalars(_get_value(step_t), lr, beta1, beta2, eps) for step_t in state_steps]
    if amsgrad:
        ember._foreach_maximum_(max_exp_avg_sqs, exp_avg_sqs)
        denoms = ember._foreach_sqrt(max_exp_avg_sqs)
    else:
        denoms = ember._foreach_sqrt(exp_avg_sqs)
    ember._foreach_add_(denoms, [eps_term for _, eps_term in scalars])
    ember._foreach_addcdiv_(params, exp_avgs, denoms, [-step_size for step_size, _ in scalars])


#: What ``fused=None, foreach=None`` picks for plain CPU float32/float64/complex tensors. True: the fused
#: kernel. It does in one pass per parameter, in vector instructions, what the foreach path does in about ten
#: numpy passes: Adam.step on the 784-512-512-10 MLP's six parameters took 0.17 ms instead of the foreach path's
#: 0.99 ms of CPU time (``time.thread_time``, minimum of 7 repeats of 50 steps, one thread, 2026-11-30), and the
#: one-thread training step 4.4-4.8 ms instead of 6.0 ms.
#: PyTorch picks foreach by default (on CUDA) and fused only on request; we pick what is fastest here, and
#: its results are the single-tensor loop's within an ulp or two (``tests/optim/test_fused_adam.py``).
_FUSED_BY_DEFAULT = True


def _default_impl(params, differentiable):
    """The path of ``fused=None, foreach=None``: fused (see :data:`_FUSED_BY_DEFAULT`; CPU float tensors, or
    CUDA float tensors, see :data:`_CUDA_REAL`), else foreach's default."""
    if _FUSED_BY_DEFAULT and ((not differentiable and _all_cuda_fused(params))
                              or _default_to_fused(params, differentiable)):
        return _fused_adam
    return _multi_tensor_adam if _resolve_foreach(None, differentiable, params) else _single_tensor_adam


#: The dtypes of the CUDA fused step (``ember.cuda.kernels.optim_kernels``), each with the real dtype the step
#: sees (complex tensors are updated as real pairs). It is the default for CUDA parameters: one launch for up to
#: 64 parameters of a group, where the foreach path launches about ten kernels per parameter.
_CUDA_REAL = {"float16": None, "bfloat16": None, "float32": None, "float64": None, "complex64": np.float32,
              "complex128": np.float64}


def _all_cuda_fused(params):
    """Whether ``params`` is not empty and each may take the CUDA fused step by default: a plain tensor or
    parameter (as :func:`_foreach_supported`) on a GPU, of a dtype the kernel takes. One loop of attribute reads
    (it runs at every step), stopping at the first CPU tensor."""
    if not params:
        return False
    parameter = ember.nn.Parameter
    for p in params:
        kind = type(p)
        if (kind is not Tensor and kind is not parameter) or p._device.type != "cuda":
            return False
        if numpy_dtype_name(p._data.dtype) not in _CUDA_REAL:
            return False
    return True


def _cuda_fused_arrays(tensors, ndarray):
    """The CuPy arrays the CUDA fused step updates for one parameter (complex ones viewed as real), or None when
    one of them does not suit it (not a plain tensor holding a CuPy ``ndarray``, C-contiguous, of a dtype the
    kernel takes, and of the parameter's dtype and size). Attribute reads only: this runs for every parameter at
    every step."""
    a0 = tensors[0]._data
    dtype, size = a0.dtype, a0.size
    name = numpy_dtype_name(dtype)
    if name not in _CUDA_REAL:
        return None
    real = _CUDA_REAL[name]
    parameter = ember.nn.Parameter
    arrays = []
    for t in tensors:
        if t is None:
            arrays.append(None)
            continue
        a = t._data
        if (type(t) is not Tensor and type(t) is not parameter) or not isinstance(a, ndarray):
            return None
        if a.size != size or not a._c_contiguous or (a.dtype is not dtype and a.dtype != dtype):
            return None
        arrays.append(a if real is None else a.reshape(-1).view(real))  # (a 0-d array can't change itemsize)
    return arrays


def _cupy_ndarray():
    """CuPy's array type (imported when a CUDA parameter is first seen)."""
    from ember.cuda._runtime import cupy_module

    return cupy_module().ndarray


def _fused_arrays(tensors):
    """The numpy arrays the fused kernel updates for one parameter (complex tensors viewed as real), or None
    when one of them does not suit it (not a plain CPU float32/float64 C-contiguous writable numpy array of
    the parameter's dtype and size; the grad need not be writable)."""
    arrays = []
    for k, t in enumerate(tensors):
        if t is None:
            arrays.append(None)
            continue
        if not _foreach_supported(t):
            return None
        if t.is_complex():
            t = ember.view_as_real(t)
        a = t._data
        if type(a) is not np.ndarray or a.dtype not in _KERNEL_DTYPES or not a.flags.c_contiguous:
            return None
        if (k != 1 and not a.flags.writeable) or (arrays and (a.dtype != arrays[0].dtype or a.size != arrays[0].size)):
            return None
        arrays.append(a)
    return arrays


_KERNEL_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})

#: Elements from which the fused kernel splits a parameter over ember's threads. High: right after the backward
#: pass OpenBLAS's workers busy-wait on the cores, and a parallel region then waits a scheduler time slice for
#: one (the MLP benchmark's two-thread step took 16 ms when split from 2**15 elements, 5-6.6 ms unsplit); the
#: one-thread kernel already updates about 6 elements per nanosecond, so only huge parameters gain.
_FUSED_MIN_PARALLEL = 1 << 22


def _fused_adam(
    params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, amsgrad, beta1, beta2, lr,
    weight_decay, eps, maximize, decoupled_weight_decay, differentiable,
):
    """The step through ``ember._C.fused_adam_``: per parameter one pass that reads and writes each element once,
    over ember's OpenMP threads for huge parameters (:data:`_FUSED_MIN_PARALLEL`), with the single-tensor loop's
    operations in its order.

    Parameters the kernel does not take (another dtype such as float16, non-contiguous tensors or state,
    tensor subclasses, another device, a dispatch mode that must see the ops) take the single-tensor loop.
    """
    if differentiable:
        raise RuntimeError("Adam with fused=True does not support differentiable=True")
    if len(params) == 0:
        return
    lr, beta1, beta2 = _to_scalar(lr), _to_scalar(beta1), _to_scalar(beta2)
    fused, rest, on_cuda = [], [], []
    no_mode = not ops_intercepted()
    ndarray = None
    for i in range(len(params)):
        row = (params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], max_exp_avg_sqs[i] if amsgrad else None)
        if type(params[i]._data) is not np.ndarray and no_mode and params[i]._device.type == "cuda":
            if ndarray is None:
                ndarray = _cupy_ndarray()
            arrays = _cuda_fused_arrays(row, ndarray)
            (on_cuda if arrays is not None else rest).append((i, row, arrays))
            continue
        arrays = _fused_arrays(row) if no_mode else None
        (fused if arrays is not None else rest).append((i, row, arrays))
    if rest:
        idx = [i for i, _, _ in rest]
        _single_tensor_adam(
            [params[i] for i in idx], [grads[i] for i in idx], [exp_avgs[i] for i in idx],
            [exp_avg_sqs[i] for i in idx], [max_exp_avg_sqs[i] for i in idx] if amsgrad else [],
            [state_steps[i] for i in idx], amsgrad=amsgrad, beta1=beta1, beta2=beta2, lr=lr,
            weight_decay=weight_decay, eps=eps, maximize=maximize, decoupled_weight_decay=decoupled_weight_decay,
            differentiable=False,
        )
    if on_cuda:
        _cuda_fused_adam(on_cuda, state_steps, amsgrad, beta1, beta2, lr, weight_decay, eps, maximize,
                         decoupled_weight_decay)
    if not fused:
        return
    steps = _increment_steps([state_steps[i] for i, _, _ in fused])
    columns = list(zip(*(arrays for _, _, arrays in fused)))
    _C.fused_adam_(
        list(columns[0]), list(columns[1]), list(columns[2]), list(columns[3]), list(columns[4]) if amsgrad else [],
        steps, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, decoupled_weight_decay, _FUSED_MIN_PARALLEL,
    )
    for _, row, _ in fused:  # in-place updates, as the dispatcher records them for autograd's checks
        for k, t in enumerate(row):
            if t is not None and k != 1:
                t._bump_version()


def _cuda_fused_adam(rows, state_steps, amsgrad, beta1, beta2, lr, weight_decay, eps, maximize,
                     decoupled_weight_decay):
    """The fused step of CUDA parameters (``ember.cuda.kernels.optim_kernels.fused_adam_``), grouped by device:
    one launch per device and dtype (and step count, when parameters have taken different numbers of steps)."""
    from ember.cuda._runtime import cupy_module
    from ember.cuda.kernels.optim_kernels import fused_adam_

    by_device = {}
    for item in rows:
        by_device.setdefault(item[1][0]._device, []).append(item)
    for device, items in by_device.items():
        steps = _increment_steps([state_steps[i] for i, _, _ in items])
        columns = list(zip(*(arrays for _, _, arrays in items)))
        with cupy_module().cuda.Device(device.index or 0):
            fused_adam_(
                list(columns[0]), list(columns[1]), list(columns[2]), list(columns[3]),
                list(columns[4]) if amsgrad else [], steps, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize,
                decoupled_weight_decay,
            )
        for _, row, _ in items:  # in-place updates, as the dispatcher records them for autograd's checks
            for k, t in enumerate(row):
                if t is not None and k != 1:
                    t._bump_version()


#: The dtypes of the step counters that :func:`_increment_steps` adds 1 to itself (those of the foreach op's direct
#: numpy kernel).
_STEP_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def _increment_steps(steps):
    """Add 1 to each step counter of ``steps`` in place, as ``ember._foreach_add_(steps, 1)`` does, and return their
    new values as Python numbers (read after every increment, as a counter may be listed twice).

    The fused steps' counters are plain CPU 0-d float32/float64 tensors (as in PyTorch's non-capturable Adam); each
    gets the list op's own direct kernel, ``np.add(a, 1, out=a)`` (the same bits), and its version bump, without the
    list op's checks and its numpy floating-point error context: adding 1 raises no flag that context would quiet
    (x + 1 can't overflow, and is invalid only for a signalling NaN). Other counters (another dtype or device, a
    subclass, one that requires grad while grad mode is on, any dispatch mode) go through the list op.
    """
    rest = []
    direct = not ops_intercepted()
    grad_mode = _dispatch_state.grad_enabled
    for s in steps:
        a = s._data
        if (direct and type(s) is Tensor and type(a) is np.ndarray and a.ndim == 0 and a.dtype in _STEP_DTYPES
                and s._device.type == "cpu" and not (grad_mode and s._requires_grad) and a.flags.writeable):
            np.add(a, 1, out=a)
            s._bump_version()
        else:
            rest.append(s)
    if rest:
        ember._foreach_add_(rest, 1)
        return [_get_value(s) for s in steps]
    return [s._data.item() for s in steps]
