"""Errors that GPU kernels find in their inputs, reported at the next synchronizing call.

A kernel that meets a bad value (a class index outside ``[0, C)`` in ``cross_entropy``) writes a flag in
device memory instead of stopping; reading the flag at once would make the host wait for the GPU at every
call (about 170 µs of a small training step on the H200's machine, where the loss is computed). As
PyTorch's CUDA kernels report their device-side asserts at the next call that waits for the GPU, ember
reads pending flags at the next host read of a cuda tensor (``.cpu()``, ``.item()``, ``.numpy()``,
``.tolist()``) and at :func:`ember.cuda.synchronize`, and raises the error there. Unlike a CUDA
device-side assert, the error leaves the device usable.
"""

from __future__ import annotations

__all__ = ["defer", "raise_pending"]

_pending = {}  # a key (the flag's device) -> a check that raises the error its flag records


def defer(key, check):
    """Run ``check()`` (which raises when its flag is set) at the next synchronizing call. One check per
    ``key`` is kept: a flag records the first bad value until it is read."""
    _pending[key] = check


def raise_pending():
    """Run the pending checks (each reads its flag: a small copy that waits for the GPU). Raises the first
    error found; every pending check is consumed, and the flags are reset by their checks."""
    if not _pending:
        return
    checks = list(_pending.values())
    _pending.clear()
    error = None
    for check in checks:
        try:
            check()
        except Exception as exc:  # keep the first, reset the other flags too
            error = error or exc
    if error is not None:
        raise error
