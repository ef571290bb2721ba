"""``try``/``except``/``finally`` that do not raise, exceptions raised and caught, early returns."""

from __future__ import annotations

from ._entry import Theme

theme = Theme("exceptions")


@theme.fn(lambda g: g.randn(4), trains=True)
def try_without_exception(x):
    try:
        y = x * 2
    except RuntimeError:
        y = x
    return y + 1


@theme.fn(lambda g: g.randn(4), trains=True)
def try_finally(x):
    out = []
    try:
        out.append(x.sin())
    finally:
        out.append(x.cos())
    return out[0] + out[1]


@theme.fn(lambda g: g.randn(4), trains=True)
def caught_key_error(x):
    d = {"a": 2.0}
    try:
        s = d["b"]
    except KeyError:
        s = 3.0
    return x * s


@theme.fn(lambda g: g.randn(3), trains=True)
def caught_raise_in_helper(x):
    def check(v):
        if v < 0:
            raise ValueError("negative")
        return v

    try:
        k = check(-1)
    except ValueError:
        k = 4
    return x * k


@theme.fn(lambda g: g.randn(4), trains=True)
def early_return_on_flag(x, fast=True):
    if fast:
        return x * 2
    y = x.exp()
    return y.log()


@theme.fn(lambda g: g.randn(2, 2), trains=True)
def early_return_in_loop(x):
    for i in range(10):
        x = x * 0.5
        if i == 2:
            return x
    return x * 0


@theme.fn(lambda g: g.randn(5), trains=True)
def guard_clause_shape(x):
    if x.dim() != 1:
        raise ValueError(f"expected a vector, got {x.dim()} dims")
    if x.shape[0] == 0:
        return x
    return x.cumsum(0)


@theme.fn(lambda g: g.randn(3))
def return_none_branch(x):
    if x.shape[0] > 5:
        return None
    return x.abs()


@theme.fn(lambda g: g.randn(3), trains=True)
def try_else(x):
    try:
        y = x + 1
    except ZeroDivisionError:
        y = x
    else:
        y = y * 2
    return y


@theme.fn(lambda g: g.randn(2))
def raise_from_assertion_checked(x):
    """A user assert on a Python value that holds."""
    assert x.dim() == 1, "vector expected"
    return x * 2


@theme.fn(lambda g: g.randn(3), trains=True)
def caught_index_error(x):
    items = [x]
    try:
        other = items[3]
    except IndexError:
        other = x * 5
    return other
