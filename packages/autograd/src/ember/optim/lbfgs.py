"""L-BFGS, with an optional strong-Wolfe line search.

The two-loop recursion is Nocedal & Wright, "Numerical Optimization" (2nd ed., 2006), Algorithm 7.4;
the line search is their Algorithm 3.5 (bracketing) and Algorithm 3.6 (zoom), with the trial steps
chosen by cubic interpolation (section 3.5, equation 3.59), following minFunc (Schmidt) and
PyTorch's ``torch.optim.LBFGS``, whose iteration, stopping rules and state layout this follows exactly.
"""

from __future__ import annotations

import math

import ember
from ember._tensor import Tensor

from .optimizer import Optimizer, _check_hyperparameters, _get_value, _to_scalar

__all__ = ["LBFGS"]


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """Minimiser of the cubic through ``(x1, f1)``, ``(x2, f2)`` with slopes ``g1``, ``g2``, clipped to ``bounds``.

    Nocedal & Wright (2006), equation 3.59. Falls back to the midpoint of the bounds when the cubic
    has no real minimiser. ``bounds`` defaults to the interval spanned by ``x1`` and ``x2``.
    """
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square >= 0:
        d2 = math.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """Line search for a step ``t`` along ``d`` satisfying the strong Wolfe conditions.

    Nocedal & Wright (2006), Algorithm 3.5 (bracketing phase) and Algorithm 3.6 (zoom phase), with
    cubic interpolation for the trial steps; the step is sought such that::

        f(x + t d) <= f(x) + c1 t g'd   and   |g(x + t d)'d| <= c2 |g'd|

    Args:
        obj_func: ``(x, t, d) -> (loss, flat_grad)`` at ``x + t d`` (restores ``x`` afterwards).
        x: the parameters at the start of the search (a list of tensors).
        t (float): initial step. d (Tensor): descent direction (flat). f (float): loss at ``x``.
        g (Tensor): flat gradient at ``x``. gtd (float): ``g'd`` (negative).
        c1, c2 (float): the sufficient-decrease and curvature constants (0 < c1 < c2 < 1).
        tolerance_change (float): stop zooming when the bracket times ``max|d|`` is below this.
        max_ls (int): maximum number of function evaluations.

    Returns:
        tuple: ``(f_new, g_new, t, ls_func_evals)``.
    """
    d_norm = _get_value(d.abs().max())
    g = g.clone()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = _get_value(g_new.dot(d))

    # Bracketing phase (Algorithm 3.5).
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    bracket_gtd = None
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket = [t_prev, t]
            bracket_f = [f_prev, f_new]
            bracket_g = [g_prev, g_new.clone()]
            bracket_gtd = [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket = [t]
            bracket_f = [f_new]
            bracket_g = [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket = [t_prev, t]
            bracket_f = [f_prev, f_new]
            bracket_g = [g_prev, g_new.clone()]
            bracket_gtd = [gtd_prev, gtd_new]
            break
        # Extrapolate: a cubic step within [t + 0.01 (t - t_prev), 10 t].
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        t_prev = tmp
        f_prev = f_new
        g_prev = g_new.clone()
        gtd_prev = gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = _get_value(g_new.dot(d))
        ls_iter += 1

    if ls_iter == max_ls:
        bracket = [0, t]
        bracket_f = [f, f_new]
        bracket_g = [g, g_new]

    # Zoom phase (Algorithm 3.6): shrink the bracket until a point satisfies the strong Wolfe conditions.
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        # Safeguard: move away from the bracket's ends when progress is insufficient.
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False

        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = _get_value(g_new.dot(d))
        ls_iter += 1

        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos] = t
            bracket_f[high_pos] = f_new
            bracket_g[high_pos] = g_new.clone()
            bracket_gtd[high_pos] = gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos] = bracket[low_pos]
                bracket_f[high_pos] = bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]
            bracket[low_pos] = t
            bracket_f[low_pos] = f_new
            bracket_g[low_pos] = g_new.clone()
            bracket_gtd[low_pos] = gtd_new

    t = bracket[low_pos]
    f_new = bracket_f[low_pos]
    g_new = bracket_g[low_pos]
    return f_new, g_new, t, ls_func_evals


class LBFGS(Optimizer):
    """L-BFGS, PyTorch's ``torch.optim.LBFGS``.

    Each ``step(closure)`` runs up to ``max_iter`` quasi-Newton iterations on all parameters viewed
    as one flat vector: the direction comes from the two-loop recursion over the last
    ``history_size`` curvature pairs ``(s, y)`` (Nocedal & Wright, Algorithm 7.4); the step is
    ``lr`` (``min(1, 1 / |g|_1) * lr`` on the first iteration), or is found by a strong-Wolfe line
    search (``line_search_fn="strong_wolfe"``). Iteration stops when ``max|g| <= tolerance_grad``,
    when the step or the loss change is below ``tolerance_change``, or after ``max_eval``
    closure evaluations.

    All state lives in ``state[params[0]]``: ``"func_evals"``, ``"n_iter"``, ``"d"``, ``"t"``,
    ``"old_dirs"``, ``"old_stps"``, ``"ro"``, ``"H_diag"``, ``"prev_flat_grad"``, ``"prev_loss"``
    and ``"al"``, as in PyTorch. Memory use is ``param_bytes * (history_size + 1)``.

    Args:
        params (iterable): tensors to optimize (a single parameter group).
        lr (float, default 1): learning rate (the initial step of the line search).
        max_iter (int, default 20): iterations per ``step``.
        max_eval (int, optional): closure evaluations per ``step``; default ``max_iter * 5 // 4``.
        tolerance_grad (float, default 1e-7): first-order optimality tolerance (max-norm of the gradient).
        tolerance_change (float, default 1e-9): tolerance on the change of the loss or parameters.
        history_size (int, default 100): number of curvature pairs kept.
        line_search_fn (str, optional): ``None`` or ``"strong_wolfe"``.

    Raises:
        ValueError: a negative ``lr``, a tensor ``lr`` with more than one element, or more than one
            parameter group.
        RuntimeError: ``line_search_fn`` other than ``None`` or ``"strong_wolfe"`` (at ``step``).

    Example::

        >>> opt = ember.optim.LBFGS([x], line_search_fn="strong_wolfe")
        >>> def closure():
        ...     opt.zero_grad()
        ...     loss = f(x)
        ...     loss.backward()
        ...     return loss
        >>> opt.step(closure)
    """

    def __init__(
        self,
        params,
        lr: float | Tensor = 1,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ) -> None:
        _check_hyperparameters(lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = {
            "lr": lr,
            "max_iter": max_iter,
            "max_eval": max_eval,
            "tolerance_grad": tolerance_grad,
            "tolerance_change": tolerance_change,
            "history_size": history_size,
            "line_search_fn": line_search_fn,
        }
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]
        self._numel_cache = None

    def _numel(self) -> int:
        if self._numel_cache is None:
            self._numel_cache = sum(2 * p.numel() if p.is_complex() else p.numel() for p in self._params)
        return self._numel_cache

    def _gather_flat_grad(self) -> Tensor:
        views = []
        for p in self._params:
            if p.grad is None:
                view = ember.zeros(p.numel(), dtype=p.dtype, device=p.device)
            else:
                view = p.grad.reshape(-1)
            if view.is_complex():
                view = ember.view_as_real(view).reshape(-1)
            views.append(view)
        return ember.cat(views, 0)

    def _add_grad(self, step_size, update) -> None:
        step_size = _get_value(step_size)
        offset = 0
        for p in self._params:
            if p.is_complex():
                p = ember.view_as_real(p)
            numel = p.numel()
            p.add_(update[offset : offset + numel].view_as(p), alpha=step_size)
            offset += numel
        if offset != self._numel():
            raise AssertionError(f"Expected offset {offset} to equal {self._numel()}")

    def _clone_param(self):
        return [p.clone() for p in self._params]

    def _set_param(self, params_data) -> None:
        for p, pdata in zip(self._params, params_data):
            p.copy_(pdata)

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        with ember.enable_grad():
            loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    def step(self, closure):
        """Perform up to ``max_iter`` L-BFGS iterations.

        Args:
            closure (Callable): re-evaluates the model (zeroing the gradients, calling ``backward``)
                and returns the loss; it is called with gradients enabled.

        Returns:
            The loss returned by the first call of ``closure``.
        """
        with ember.no_grad():
            return self._step(closure)

    def _step(self, closure):
        if len(self.param_groups) != 1:
            raise AssertionError(f"Expected exactly one param_group, but got {len(self.param_groups)}")

        def eval_closure():
            with ember.enable_grad():
                return closure()

        group = self.param_groups[0]
        lr = _to_scalar(group["lr"])
        max_iter = group["max_iter"]
        max_eval = group["max_eval"]
        tolerance_grad = group["tolerance_grad"]
        tolerance_change = group["tolerance_change"]
        line_search_fn = group["line_search_fn"]
        history_size = group["history_size"]

        # One state entry, on the first parameter (as in PyTorch).
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = eval_closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1

        flat_grad = self._gather_flat_grad()
        opt_cond = _get_value(flat_grad.abs().max()) <= tolerance_grad
        if opt_cond:
            return orig_loss

        d = state.get("d")
        t = state.get("t")
        old_dirs = state.get("old_dirs")
        old_stps = state.get("old_stps")
        ro = state.get("ro")
        H_diag = state.get("H_diag")
        prev_flat_grad = state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            # Direction: steepest descent first, then the two-loop recursion (N&W Algorithm 7.4).
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs = []
                old_stps = []
                ro = []
                H_diag = 1
            else:
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = y.dot(s)
                if _get_value(ys) > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y)

                num_old = len(old_dirs)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]

                q = flat_grad.neg()
                for i in range(num_old - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q.add_(old_dirs[i], alpha=-_get_value(al[i]))
                d = r = q.mul(H_diag)
                for i in range(num_old):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r.add_(old_stps[i], alpha=_get_value(al[i] - be_i))

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            # Step length.
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / _get_value(flat_grad.abs().sum())) * lr
            else:
                t = lr

            gtd = _get_value(flat_grad.dot(d))
            if gtd > -tolerance_change:
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x_init = self._clone_param()

                def obj_func(x, t, d):
                    return self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals
                )
                self._add_grad(t, d)
                opt_cond = _get_value(flat_grad.abs().max()) <= tolerance_grad
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:
                    loss = float(eval_closure())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = _get_value(flat_grad.abs().max()) <= tolerance_grad
                    ls_func_evals = 1

            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            # Stopping conditions.
            if n_iter == max_iter:
                break
            if current_evals >= max_eval:
                break
            if opt_cond:
                break
            if _get_value(d.mul(t).abs().max()) <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state["d"] = d
        state["t"] = t
        state["old_dirs"] = old_dirs
        state["old_stps"] = old_stps
        state["ro"] = ro
        state["H_diag"] = H_diag
        state["prev_flat_grad"] = prev_flat_grad
        state["prev_loss"] = prev_loss
        return orig_loss
