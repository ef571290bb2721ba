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

__all__ = ["defer", "raise_pending", "recording_checks", "record_check", "RecordedCheck"]

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


# -- checks recorded into a CUDA graph -----------------------------------------------------------------------
#
# A stream that captures a CUDA graph cannot read a device value on the host, and a replay runs no Python, so a
# check such as an index bounds test cannot raise where it runs. While ember's graph runner records
# (ember._inductor.runtime.cudagraphs), such a check instead ORs its device flag into a word of the recording's
# memory (a recorded kernel: every replay adds its own result), and the runner arms a read of that word after each
# replay: the error is raised at the next synchronizing call, as a device-side assert's would be.

_recording = []  # the open recordings' check lists (innermost last)


class RecordedCheck:
    """A check recorded into a CUDA graph: the device word its replays OR their flags into, and the error."""

    __slots__ = ("word", "error")

    def __init__(self, word, error):
        self.word, self.error = word, error

    def clear(self):
        """Zero the word (after the capture: its allocation is uninitialised, and a read resets it)."""
        self.word.fill(False)

    def arm(self):
        """Read the word at the next synchronizing call (:func:`defer`); raise ``error()`` if a replay set it."""

        def check():
            if bool(self.word):
                self.clear()
                raise self.error()

        defer(("recorded check", id(self)), check)


class recording_checks:
    """``with recording_checks() as checks:`` around a graph capture: the checks :func:`record_check` adds during
    the block are appended to ``checks`` (a list of :class:`RecordedCheck`)."""

    def __enter__(self):
        self.checks = []
        _recording.append(self.checks)
        return self.checks

    def __exit__(self, *exc):
        _recording.remove(self.checks)
        return False


def record_check(flag, error):
    """Inside :class:`recording_checks`: OR the 0-d device bool ``flag`` (True when the check failed) into a new
    word with a kernel the capture records, and keep ``error`` (a callable making the exception) for the reads
    after replays. Returns False outside a recording (the caller then checks on the host)."""
    if not _recording:
        return False
    xp = _namespace(flag)
    word = xp.empty((), dtype=bool)
    xp.logical_or(word, flag, out=word)
    _recording[-1].append(RecordedCheck(word, error))
    return True


def _namespace(array):
    from .._ops._array_module import array_namespace

    return array_namespace(array)
