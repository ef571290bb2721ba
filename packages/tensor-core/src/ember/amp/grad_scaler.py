"""GradScaler: dynamic loss scaling for mixed-precision training (PyTorch's ``torch.amp.GradScaler``).

A float16 gradient underflows to zero where a float32 one would not. The scaler multiplies the loss by a
large factor before ``backward`` so that gradients stay representable, divides them back before the
optimizer step, and skips the step when a gradient came out inf or NaN (the factor was too large). The
factor halves after such a step and doubles after ``growth_interval`` steps in a row without one.

It needs only what every optimizer has (``param_groups`` and ``step``), so it lives in core with autocast.
"""

from __future__ import annotations

import enum
import warnings

__all__ = ["GradScaler", "OptState"]

_FLOAT32_MAX = 3.4028234663852886e38


class OptState(enum.Enum):
    """Where an optimizer is in the scaler's cycle since the last :meth:`GradScaler.update`."""

    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _ember():
    import ember

    return ember


class GradScaler:
    """Scale the loss, unscale the gradients, skip steps with inf/NaN gradients, adapt the scale.

    Args:
        device (str): the device type of the model's gradients (default ``"cuda"``).
        init_scale (float): the first scale factor (default ``2.0 ** 16``).
        growth_factor (float): the factor the scale grows by after ``growth_interval`` good steps; > 1.
        backoff_factor (float): the factor the scale shrinks by after a step with inf/NaN gradients; in (0, 1).
        growth_interval (int): good steps in a row before the scale grows; > 0.
        enabled (bool): when False every method is a pass-through (``scale`` returns its input,
            ``step`` just steps).

    Raises:
        ValueError: for factors or an interval out of range.

    A scaler for ``device="cuda"`` when CUDA is not available warns and disables itself, as in PyTorch.

    Example:
        >>> import ember
        >>> model = ember.nn.Linear(3, 1)
        >>> opt = ember.optim.SGD(model.parameters(), lr=0.1)
        >>> scaler = ember.amp.GradScaler("cpu")
        >>> loss = model(ember.randn(4, 3)).sum()
        >>> scaler.scale(loss).backward()
        >>> scaler.step(opt)
        >>> scaler.update()
        >>> scaler.get_scale()
        65536.0
    """

    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if not isinstance(device, str):
            device = str(device)
        self._device = device
        if growth_factor <= 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff_factor}")
        if not isinstance(growth_interval, int) or growth_interval <= 0:
            raise ValueError(f"GradScaler: growth_interval must be a positive int, got {growth_interval!r}")
        self._enabled = bool(enabled)
        if self._enabled and device.split(":")[0] == "cuda" and not _ember().cuda.is_available():
            warnings.warn(
                "ember.amp.GradScaler is enabled, but CUDA is not available. Disabling.", UserWarning, stacklevel=2
            )
            self._enabled = False
        self._init_scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._init_growth_tracker = 0
        self._scale = None  # a one-element float32 tensor on the gradients' device, made on first scale()
        self._growth_tracker = None  # an int32 tensor beside it
        self._per_optimizer = {}  # id(optimizer) -> {"stage": OptState, "found_inf": tensor or None}

    # ---- scaling ---------------------------------------------------------------------------------

    def _lazy_init(self, device):
        ember = _ember()
        self._scale = ember.full((), self._init_scale, dtype=ember.float32, device=device)
        self._growth_tracker = ember.full((), self._init_growth_tracker, dtype=ember.int32, device=device)

    def scale(self, outputs):
        """Multiply ``outputs`` (a tensor, or nested lists/tuples of tensors) by the scale factor.

        Returns:
            the scaled outputs, of the same structure; ``outputs`` unchanged when disabled.

        Raises:
            TypeError: for outputs that hold something other than tensors.
        """
        if not self._enabled:
            return outputs
        ember = _ember()
        if isinstance(outputs, ember.Tensor):
            if self._scale is None:
                self._lazy_init(outputs.device)
            return outputs * self._scale.to(device=outputs.device)
        if isinstance(outputs, (list, tuple)):
            scaled = [self.scale(o) for o in outputs]
            return type(outputs)(scaled) if isinstance(outputs, tuple) else scaled
        raise TypeError(f"GradScaler.scale: outputs must be a Tensor or an iterable of Tensors, got "
                        f"{type(outputs).__name__}")

    def _state_of(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": OptState.READY, "found_inf": None})

    def _check_scale_exists(self, where):
        if self._scale is None:
            raise RuntimeError(f"GradScaler.{where}: no scale yet; call scale() on the loss first "
                               "(it sets the scale up on the loss's device)")

    def _unscale_grads(self, optimizer, inv_scale, allow_fp16):
        """Divide every gradient by the scale in place; the returned tensor is 1.0 if any was inf or NaN."""
        ember = _ember()
        found_inf = ember.zeros((), dtype=ember.float32, device=self._scale.device)
        with ember.no_grad():
            grads = []
            for group in optimizer.param_groups:
                for param in group["params"]:
                    grad = param.grad
                    if grad is None:
                        continue
                    if not allow_fp16 and grad.dtype is ember.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    if getattr(grad, "is_sparse", False):
                        grad = grad.coalesce()._values()
                    grads.append(grad)
            if found_inf.device.type == "cuda":  # one fused kernel for all of them (ember.cuda.kernels.grad_scaling)
                from ..cuda.kernels import grad_scaling

                if grad_scaling.tensors_unscale_(grads, inv_scale, found_inf):
                    return found_inf
            for grad in grads:
                # counted on the gradients' device: reading a flag per parameter would wait for the GPU each time
                bad = ember.logical_not(ember.isfinite(grad).all())
                found_inf.add_(bad.to(dtype=found_inf.dtype, device=found_inf.device))
                grad.mul_(inv_scale.to(dtype=grad.dtype, device=grad.device))
        return found_inf.clamp_(max=1.0)

    def unscale_(self, optimizer):
        """Divide ``optimizer``'s gradients by the scale factor, in place (before clipping them, say).

        Called at most once per optimizer between :meth:`update` calls; :meth:`step` calls it if you did not.

        Raises:
            RuntimeError: when called twice since the last update, or after :meth:`step`.
        """
        if not self._enabled:
            return
        self._check_scale_exists("unscale_")
        state = self._state_of(optimizer)
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = self._scale.double().reciprocal().float()
        state["found_inf"] = self._unscale_grads(optimizer, inv_scale, allow_fp16=False)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscale ``optimizer``'s gradients (if :meth:`unscale_` was not called) and step it, unless a
        gradient is inf or NaN, in which case the step is skipped.

        Args:
            optimizer: the optimizer to step.
            *args: passed to ``optimizer.step``.
            **kwargs: passed to ``optimizer.step``.

        Returns:
            what ``optimizer.step`` returned, or None when the step was skipped.

        Raises:
            RuntimeError: for a ``closure`` argument, or a second step since the last update.
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_exists("step")
        state = self._state_of(optimizer)
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        result = None
        if float(state["found_inf"].item()) == 0.0:
            result = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return result

    def update(self, new_scale=None):
        """Adapt the scale factor after this iteration's steps (or set it to ``new_scale``).

        The scale is multiplied by ``backoff_factor`` if any optimizer stepped over inf/NaN gradients since
        the last update; otherwise the count of good steps grows, and after ``growth_interval`` of them the
        scale is multiplied by ``growth_factor``.

        Args:
            new_scale (float or Tensor, optional): the scale to use from now on.

        Raises:
            RuntimeError: when no optimizer stepped since the last update (and no ``new_scale`` is given).
        """
        if not self._enabled:
            return
        self._check_scale_exists("update")
        ember = _ember()
        if new_scale is not None:
            if isinstance(new_scale, ember.Tensor):
                if new_scale.numel() != 1 or not new_scale.dtype.is_floating_point:
                    raise ValueError("GradScaler.update: new_scale must be a one-element floating tensor")
                self._scale.copy_(new_scale.reshape(()))
            else:
                self._scale.fill_(float(new_scale))
        else:
            found = [s["found_inf"] for s in self._per_optimizer.values() if s["found_inf"] is not None]
            if not found:
                raise RuntimeError("No inf checks were recorded prior to update.")
            if self._scale.device.type == "cuda" and self._update_on_device(found):
                pass  # nothing read back: the step needs no second wait for the GPU
            elif any(float(f.item()) != 0.0 for f in found):
                self._scale.mul_(self._backoff_factor)
                self._growth_tracker.fill_(0)
            else:
                tracker = int(self._growth_tracker.item()) + 1
                if tracker == self._growth_interval:
                    grown = float(self._scale.item()) * self._growth_factor
                    if grown <= _FLOAT32_MAX:  # a scale that would overflow float32 stays where it is
                        self._scale.mul_(self._growth_factor)
                    tracker = 0
                self._growth_tracker.fill_(tracker)
        self._per_optimizer.clear()

    def _update_on_device(self, found):
        """The scale update in one CUDA kernel (:mod:`ember.cuda.kernels.grad_scaling`); False when it does not
        apply (then the host code runs)."""
        from ..cuda.kernels import grad_scaling

        return grad_scaling.tensors_update_scale_(self._scale, self._growth_tracker, found, self._growth_factor,
                                                  self._backoff_factor, self._growth_interval)

    # ---- accessors ---------------------------------------------------------------------------------

    def get_scale(self):
        """The current scale factor as a Python float (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker.item())

    def is_enabled(self):
        """Whether the scaler scales (False when built disabled, or for cuda without CUDA)."""
        return self._enabled

    def state_dict(self):
        """The scaler's state: ``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval`` and
        ``_growth_tracker`` (an empty dict when disabled)."""
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._get_growth_tracker(),
        }

    def load_state_dict(self, state_dict):
        """Restore a :meth:`state_dict`.

        Raises:
            RuntimeError: on a disabled scaler, or for an empty state dict (saved from a disabled one).
        """
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale.fill_(self._init_scale)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(self._init_growth_tracker)

    def __getstate__(self):
        state = self.__dict__.copy()
        if self._enabled:
            if any(s["stage"] is not OptState.READY for s in self._per_optimizer.values()):
                raise RuntimeError("A GradScaler instance may only be pickled at the beginning of an "
                                   "iteration, or at the end after scaler.update().")
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
