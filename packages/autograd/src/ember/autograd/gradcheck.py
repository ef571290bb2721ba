"""Finite-difference checks of gradients: :func:`gradcheck` and :func:`gradgradcheck`.

For a function ``f`` of tensors, the analytical vector-Jacobian products that
autograd computes are compared with central finite differences.

Complex numbers follow PyTorch's convention. For a gradient ``v`` of an
output ``y``, define the real scalar ``L = Re(sum(conj(v) * y))``; autograd's
gradient of an input ``x`` must then equal ``dL/dRe(x) + i dL/dIm(x)`` (just
``dL/dx`` for a real ``x``). The slow mode checks this for ``v`` running
over every unit vector of every output (and ``i`` times it for complex
outputs), i.e. whole Jacobians; the fast mode checks one random direction
``u`` of the inputs against one random ``v``:
``Re(<vjp(v), u>) == d/dt L(x + t u)`` (Wirtinger-free, cheap).

References: central differences, e.g. Nocedal & Wright, *Numerical
Optimization*, section 8.1; the complex convention is PyTorch's
"Autograd for Complex Numbers" note.
"""

from __future__ import annotations

import numpy as np

import ember
from ember._tensor import Tensor

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised by :func:`gradcheck` when analytical and numerical gradients differ."""


def _flat_tensors(inputs):
    return [t for t in inputs if isinstance(t, Tensor)]


def _diff_inputs(inputs):
    return [(i, t) for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]


def _outputs(fn, inputs):
    out = fn(*inputs)
    if isinstance(out, Tensor):
        return (out,)
    return tuple(out)


def _differentiable(outputs):
    return [o for o in outputs if isinstance(o, Tensor) and (o.is_floating_point() or o.is_complex())]


def _host(t):
    """``t``'s values as a numpy array: the array itself on CPU, a copy to the host on other devices.

    gradcheck compares numbers on the host by design (a test utility, not an op), so this copy is intended.
    """
    return t.detach()._host_array()


def _values(outputs):
    """Output values as complex128 numpy arrays (flattened), one per differentiable output."""
    return [np.asarray(_host(o), dtype=np.complex128).ravel() for o in _differentiable(outputs)]


def _evaluate(fn, inputs, index, flat_index, delta):
    """The outputs of ``fn`` with element ``flat_index`` of input ``index`` moved by ``delta``."""
    x = inputs[index]
    data = x.detach().contiguous().clone()  # contiguous, so that the flat view below writes into it
    flat = data.view(-1)
    flat[flat_index] = flat[flat_index] + delta
    perturbed = list(inputs)
    perturbed[index] = data
    with ember.no_grad():
        return _values(_outputs(fn, perturbed))


def _numerical_columns(fn, inputs, index, eps):
    """d(outputs)/d(Re x_j) and, for complex x, d(outputs)/d(Im x_j), for every element j of input ``index``."""
    x = inputs[index]
    n = x.numel()
    re_cols, im_cols = [], []
    for j in range(n):
        plus = _evaluate(fn, inputs, index, j, eps)
        minus = _evaluate(fn, inputs, index, j, -eps)
        re_cols.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
        if x.is_complex():
            plus = _evaluate(fn, inputs, index, j, 1j * eps)
            minus = _evaluate(fn, inputs, index, j, -1j * eps)
            im_cols.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
    return re_cols, im_cols


def _vjp(outputs, diff_inputs, out_index, v):
    """Autograd's gradient of every differentiable input for gradient ``v`` of output ``out_index``."""
    diff_outputs = _differentiable(outputs)
    target = diff_outputs[out_index]
    if not target.requires_grad:
        return [None] * len(diff_inputs)
    grads = ember.autograd.grad([target], [t for _, t in diff_inputs], [v], retain_graph=True, allow_unused=True)
    return list(grads)


def _as_numpy(g, like):
    if g is None:
        return np.zeros(like.numel(), dtype=np.complex128)
    return np.asarray(_host(g), dtype=np.complex128).ravel()


def _fail(message, raise_exception):
    if raise_exception:
        raise GradcheckError(message)
    return False


def _close(a, b, atol, rtol):
    return np.allclose(a, b, atol=atol, rtol=rtol, equal_nan=False)


def _mismatch_report(analytical, numerical, out_index, in_index, atol, rtol):
    diff = np.abs(analytical - numerical) - (atol + rtol * np.abs(numerical))
    worst = np.unravel_index(int(np.argmax(diff)), diff.shape)
    return (
        f"Jacobian mismatch for output {out_index} with respect to input {in_index},\n"
        f"numerical:{numerical}\nanalytical:{analytical}\n"
        f"The worst entry is at (output element, input element) {tuple(int(i) for i in worst)}: numerical "
        f"{numerical[worst]}, analytical {analytical[worst]} (atol={atol}, rtol={rtol})."
    )


def _check_dtypes(diff_inputs):
    import warnings

    for i, t in diff_inputs:
        if t.dtype not in (ember.float64, ember.complex128):
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating point or complex. This "
                "check will likely fail if all the inputs are not of double precision floating point or complex.",
                stacklevel=3,
            )


def gradcheck(
    func,
    inputs,
    *,
    eps=1e-6,
    atol=1e-5,
    rtol=1e-3,
    raise_exception=True,
    nondet_tol=0.0,
    check_undefined_grad=True,
    check_grad_dtypes=False,
    check_batched_grad=False,
    check_batched_forward_grad=False,
    check_forward_ad=False,
    check_backward_ad=True,
    fast_mode=False,
    masked=None,
):
    """Check the gradients of ``func`` at ``inputs`` against central finite differences.

    Args:
        func (callable): takes the inputs, returns a tensor or a sequence of tensors.
        inputs (Tensor or tuple): the point; tensors with ``requires_grad=True`` are checked
            (use float64/complex128 for meaningful results).
        eps (float): finite-difference step.
        atol, rtol (float): tolerances of the comparison.
        raise_exception (bool): raise :class:`GradcheckError` on mismatch (else return False).
        check_grad_dtypes (bool): also check that each gradient has its input's dtype.
        fast_mode (bool): check one random direction instead of whole Jacobians (one backward
            and two forward evaluations per output instead of one per element).
        check_undefined_grad, nondet_tol, check_backward_ad, masked: accepted for PyTorch compatibility.
        check_batched_grad, check_batched_forward_grad, check_forward_ad: must be False (batched and
            forward-mode checks need ember.func, which is not available yet).

    Returns:
        bool: True when every gradient matches.

    Raises:
        GradcheckError: on the first mismatch, naming the output, the input and the worst entry.
        ValueError: when no input requires grad, or an unsupported check is requested.
    """
    if check_batched_grad or check_batched_forward_grad or check_forward_ad:
        raise ValueError("batched and forward-mode gradchecks need ember.func, which is not available yet")
    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs)
    diff_inputs = _diff_inputs(inputs)
    if not diff_inputs:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of them do")
    _check_dtypes(diff_inputs)
    outputs = _outputs(func, inputs)
    diff_outputs = _differentiable(outputs)
    if check_grad_dtypes:
        for o_index, o in enumerate(diff_outputs):
            if not o.requires_grad:
                continue
            grads = _vjp(outputs, diff_inputs, o_index, ember.ones_like(o))
            for (i, t), g in zip(diff_inputs, grads):
                if g is not None and g.dtype != t.dtype:
                    return _fail(f"Gradient has dtype mismatch for input {i}: {g.dtype} vs {t.dtype}", raise_exception)
    if fast_mode:
        return _fast_check(func, inputs, outputs, diff_inputs, eps, atol, rtol, raise_exception)
    return _slow_check(func, inputs, outputs, diff_inputs, eps, atol, rtol, raise_exception)


def _slow_check(func, inputs, outputs, diff_inputs, eps, atol, rtol, raise_exception):
    diff_outputs = _differentiable(outputs)
    columns = {i: _numerical_columns(func, inputs, i, eps) for i, _ in diff_inputs}
    for o_index, o in enumerate(diff_outputs):
        m = o.numel()
        directions = [1.0] + ([1j] if o.is_complex() else [])
        for scale in directions:
            analytical = {i: np.zeros((m, t.numel()), dtype=np.complex128) for i, t in diff_inputs}
            numerical = {i: np.zeros((m, t.numel()), dtype=np.complex128) for i, t in diff_inputs}
            for k in range(m):
                v_np = np.zeros(m, dtype=np.complex128)
                v_np[k] = scale
                v = _direction_tensor(v_np, o)
                grads = _vjp(outputs, diff_inputs, o_index, v)
                for (i, t), g in zip(diff_inputs, grads):
                    analytical[i][k] = _as_numpy(g, t)
                    re_cols, im_cols = columns[i]
                    # dL/dRe(x_j) = Re(sum(conj(v) * dy/dRe(x_j))), and the same for Im
                    numerical[i][k] = [np.real(np.vdot(v_np, col[o_index])) for col in re_cols]
                    if t.is_complex():
                        numerical[i][k] = numerical[i][k] + 1j * np.array(
                            [np.real(np.vdot(v_np, col[o_index])) for col in im_cols]
                        )
            for i, _ in diff_inputs:
                if not _close(analytical[i], numerical[i], atol, rtol):
                    return _fail(_mismatch_report(analytical[i], numerical[i], o_index, i, atol, rtol), raise_exception)
    return True


def _direction_tensor(v_np, like):
    """The host array ``v_np`` as a tensor of ``like``'s shape, dtype and device."""
    if not like.is_complex():
        v_np = np.real(v_np)
    return ember.tensor(v_np.reshape(tuple(like.shape)), dtype=like.dtype, device=like.device)


def _fast_check(func, inputs, outputs, diff_inputs, eps, atol, rtol, raise_exception):
    rng = np.random.default_rng(0)
    diff_outputs = _differentiable(outputs)
    for o_index, o in enumerate(diff_outputs):
        v_np = rng.standard_normal(o.numel())
        if o.is_complex():
            v_np = v_np + 1j * rng.standard_normal(o.numel())
        v = _direction_tensor(v_np, o)
        grads = _vjp(outputs, diff_inputs, o_index, v)
        for (i, t), g in zip(diff_inputs, grads):
            u_np = rng.standard_normal(t.numel())
            if t.is_complex():
                u_np = u_np + 1j * rng.standard_normal(t.numel())
            analytical = np.real(np.vdot(_as_numpy(g, t), u_np))
            u = _direction_tensor(u_np, t)

            numerical = (
                _directional_loss(func, inputs, i, t, u, eps, o_index, v_np)
                - _directional_loss(func, inputs, i, t, u, -eps, o_index, v_np)
            ) / (2 * eps)
            if not np.isclose(analytical, numerical, atol=atol, rtol=rtol):
                return _fail(
                    f"Jacobian mismatch for output {o_index} with respect to input {i} (fast mode, a random "
                    f"direction): numerical {numerical}, analytical {analytical} (atol={atol}, rtol={rtol}). "
                    "Run with fast_mode=False for the full Jacobians.",
                    raise_exception,
                )
    return True


def _directional_loss(func, inputs, i, t, u, step, o_index, v_np):
    """``Re(sum(conj(v) * y))`` for output ``o_index`` with input ``i`` moved to ``t + step * u``."""
    moved = list(inputs)
    moved[i] = (t.detach() + step * u).detach()
    with ember.no_grad():
        y = _values(_outputs(func, moved))[o_index]
    return np.real(np.vdot(v_np, y))


def gradgradcheck(
    func,
    inputs,
    grad_outputs=None,
    *,
    eps=1e-6,
    atol=1e-5,
    rtol=1e-3,
    gen_non_contig_grad_outputs=False,
    raise_exception=True,
    nondet_tol=0.0,
    check_undefined_grad=True,
    check_grad_dtypes=False,
    check_batched_grad=False,
    check_fwd_over_rev=False,
    check_rev_over_rev=True,
    fast_mode=False,
    masked=False,
):
    """Check second derivatives: :func:`gradcheck` of the function ``(inputs, v) -> vjp(v)``.

    Args:
        func, inputs: as for :func:`gradcheck`.
        grad_outputs (sequence[Tensor], optional): the vectors ``v``; random (seeded) when omitted,
            and then they are checked as inputs too.
        other arguments: as for :func:`gradcheck`.

    Returns:
        bool: True when every second derivative matches.

    Raises:
        GradcheckError: on mismatch.
    """
    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs)
    outputs = _differentiable(_outputs(func, inputs))
    generated = grad_outputs is None
    if generated:
        rng = np.random.default_rng(0)
        grad_outputs = []
        for o in outputs:
            values = rng.standard_normal(tuple(o.shape))
            if o.is_complex():
                values = values + 1j * rng.standard_normal(tuple(o.shape))
            grad_outputs.append(ember.tensor(values, dtype=o.dtype, device=o.device).requires_grad_(True))
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    grad_outputs = list(grad_outputs)
    n_in = len(inputs)
    diff_positions = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]

    def first_derivative(*args):
        # The numerical part of gradcheck calls this under no_grad on perturbed copies that do not
        # require grad: differentiating needs both, so restore them here.
        with ember.enable_grad():
            args = tuple(
                a.detach().requires_grad_(True)
                if isinstance(a, Tensor) and not a.requires_grad and (i in diff_positions or i >= n_in)
                else a
                for i, a in enumerate(args)
            )
            return _first_derivative(args)

    def _first_derivative(args):
        xs, vs = args[:n_in], args[n_in:]
        outs = [o for o in _differentiable(_outputs(func, xs)) if o.requires_grad]
        used = [v for o, v in zip(_differentiable(_outputs(func, xs)), vs) if o.requires_grad]
        targets = [xs[i] for i in diff_positions]
        grads = ember.autograd.grad(outs, targets, used, create_graph=True, allow_unused=True)
        return tuple(g if g is not None else ember.zeros_like(t) for g, t in zip(grads, targets))

    return gradcheck(
        first_derivative,
        inputs + tuple(grad_outputs),
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        fast_mode=fast_mode,
    )
