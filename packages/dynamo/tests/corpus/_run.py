"""Running a corpus entry (eagerly or through a compiling wrapper) and comparing two runs' results.

A run builds the entry's callable and seeded inputs afresh, resets its global state, calls it, and
collects everything the caller can observe: the return value, the arguments after the call (entries
mutate lists, dicts, objects and tensors they are given), the global state the entry declares, the
module's state dict, and, for entries that train, the gradients of a fixed weighted sum of the float
outputs with respect to the float inputs and the parameters.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import ember

from ._entry import Entry


@dataclass
class Outcome:
    """What one call of an entry produced."""

    result: Any
    args_after: Any
    state: Any
    module_state: dict | None
    grads: dict | None
    aliases: list


def _aliases(result, args, kwargs):
    """Eager's object identities, which compiled code must keep: for the result and each of its top-level
    items, the argument it is (``"arg<i>"``), or the earlier item it is (``"item<j>"``), or None."""
    inputs = [*args, *kwargs.values()]
    if isinstance(result, dict):
        items = [result, *result.values()]
    elif isinstance(result, (list, tuple)):
        items = [result, *result]
    else:
        items = [result]
    out = []
    for i, item in enumerate(items):
        if isinstance(item, (int, float, bool, str, type(None))):  # small values may be interned: no identity
            out.append(None)
            continue
        source = next((f"arg{j}" for j, a in enumerate(inputs) if a is item), None)
        if source is None:
            source = next((f"item{j}" for j in range(i) if items[j] is item), None)
        out.append(source)
    return out


def _tensors(value):
    """The tensors in a nested structure, in a fixed order."""
    if isinstance(value, ember.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for k in value for t in _tensors(value[k])]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _requires_grad(args):
    """Float input tensors become leaves that require grad (walks lists, tuples, dicts)."""
    for t in _tensors(args):
        if t.dtype.is_floating_point:
            t.requires_grad_(True)


def _loss(result):
    """A weighted sum of the float outputs: fixed weights, so a transposed gradient shows."""
    total = None
    for t in _tensors(result):
        if not (t.dtype.is_floating_point and t.requires_grad):
            continue
        weights = ember.tensor(np.cos(np.arange(t.numel(), dtype=np.float32)).reshape(tuple(t.shape)))
        term = (t * weights.to(t.dtype)).sum()
        total = term if total is None else total + term
    return total


def run(entry: Entry, wrap: Callable[[Callable], Callable] | None = None, seed: int = 0) -> Outcome:
    """Call ``entry`` once on its inputs for ``seed``, through ``wrap(callable)`` when given.

    Args:
        entry: the corpus entry.
        wrap: turns the entry's callable into the one to call (e.g. ``ember.compile``); the
            module an entry builds is wrapped as a module.
        seed: selects the inputs.

    Returns:
        Outcome: the observable results of the call.
    """
    target = entry.make()
    call_args = entry.inputs(seed)
    args, kwargs = call_args.args, dict(call_args.kwargs)
    if entry.trains:
        _requires_grad((args, kwargs))
    if entry.state is not None:
        entry.state[0]()
    fn = wrap(target) if wrap is not None else target
    ember.manual_seed(seed)
    result = fn(*args, **kwargs)
    state = entry.state[1]() if entry.state is not None else None
    aliases = _aliases(result, args, kwargs)
    module_state = None
    if entry.is_module:
        module_state = {k: v.detach().clone() for k, v in target.state_dict().items()}
    grads = None
    if entry.trains:
        loss = _loss(result)
        grads = {}
        if loss is not None:
            loss.backward()
            leaves = [t for t in _tensors((args, kwargs)) if t.requires_grad]
            grads = {f"input{i}": t.grad for i, t in enumerate(leaves)}
            if entry.is_module:
                grads.update({name: p.grad for name, p in target.named_parameters()})
    return Outcome(result, (args, kwargs), state, module_state, grads, aliases)


class CompiledRunError(AssertionError):
    """A compiled run raised; the message holds the original exception and its formatted traceback."""


@contextlib.contextmanager
def reported_errors():
    """Re-raise any exception as :class:`CompiledRunError` with its traceback already formatted as text.

    Generated code (resume and break functions) may have frames without a line number; pytest's own
    traceback formatting fails on them with an INTERNALERROR that ends the whole run, while the standard
    library's formatting copes. The text keeps the full traceback for debugging.
    """
    try:
        yield
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        lines = traceback.format_exception(exc)
        cause = "".join(lines[-1:]).strip().splitlines()[-1] if lines else ""  # the innermost exception's last line
        raise CompiledRunError(f"{type(exc).__name__}: {first} | {cause}\n\n{''.join(lines)}") from None


def assert_same(expected, actual, rtol=1e-5, atol=1e-6, path="result"):
    """Raise AssertionError naming ``path`` where ``actual`` differs from ``expected``.

    Tensors: same shape, dtype and ``requires_grad``, values close; containers: same type and
    structure; objects: same attributes; Python numbers: equal (floats close).
    """
    if isinstance(expected, ember.Tensor):
        if not isinstance(actual, ember.Tensor):
            raise AssertionError(f"{path}: expected a tensor, got {type(actual).__name__}")
        if tuple(expected.shape) != tuple(actual.shape) or expected.dtype != actual.dtype:
            raise AssertionError(
                f"{path}: expected shape {tuple(expected.shape)} {expected.dtype}, "
                f"got {tuple(actual.shape)} {actual.dtype}"
            )
        if expected.requires_grad != actual.requires_grad:
            raise AssertionError(f"{path}: requires_grad {actual.requires_grad}, eager has {expected.requires_grad}")
        np.testing.assert_allclose(
            actual.detach().numpy(), expected.detach().numpy(), rtol=rtol, atol=atol, equal_nan=True, err_msg=path
        )
        return
    if type(expected) is not type(actual):
        raise AssertionError(f"{path}: expected {type(expected).__name__}, got {type(actual).__name__}")
    if isinstance(expected, dict):
        if list(expected) != list(actual):
            raise AssertionError(f"{path}: keys {list(actual)}, eager has {list(expected)}")
        for k in expected:
            assert_same(expected[k], actual[k], rtol, atol, f"{path}[{k!r}]")
    elif isinstance(expected, (list, tuple)):
        if len(expected) != len(actual):
            raise AssertionError(f"{path}: length {len(actual)}, eager has {len(expected)}")
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same(e, a, rtol, atol, f"{path}[{i}]")
    elif isinstance(expected, float):
        if not (
            math.isclose(expected, actual, rel_tol=rtol, abs_tol=atol) or (expected != expected and actual != actual)
        ):
            raise AssertionError(f"{path}: {actual!r}, eager has {expected!r}")
    elif isinstance(expected, (int, str, bool, bytes, type(None), ember.dtype)):
        if expected != actual:
            raise AssertionError(f"{path}: {actual!r}, eager has {expected!r}")
    elif dataclasses.is_dataclass(expected) or hasattr(expected, "__dict__"):
        assert_same(vars(expected), vars(actual), rtol, atol, f"{path}.__dict__")
    elif expected != actual:
        raise AssertionError(f"{path}: {actual!r}, eager has {expected!r}")


def assert_same_outcome(expected: Outcome, actual: Outcome, rtol=1e-5, atol=1e-6):
    """Compare two runs of one entry: result, mutated arguments, global state, module state, gradients, and
    which returned objects are the arguments themselves or each other."""
    assert_same(expected.result, actual.result, rtol, atol, "result")
    assert_same(expected.args_after, actual.args_after, rtol, atol, "arguments after the call")
    assert_same(expected.state, actual.state, rtol, atol, "global state")
    assert_same(expected.module_state, actual.module_state, rtol, atol, "module state_dict")
    assert_same(expected.grads, actual.grads, rtol, atol, "gradients")
    if expected.aliases != actual.aliases:
        raise AssertionError(f"object identities: compiled {actual.aliases}, eager {expected.aliases}")
