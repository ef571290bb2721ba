"""List, dict, set and generator comprehensions (inlined in 3.12+, functions before)."""

from __future__ import annotations

import ember

from ._entry import Theme

theme = Theme("comprehensions")


@theme.fn(lambda g: g.randn(3, 4), trains=True, numpy=lambda x: x * 1 + x * 2 + x * 3)
def list_comprehension_sum(x):
    return sum([x * i for i in range(1, 4)])


@theme.fn(lambda g: g.randn(6, 2), trains=True)
def comprehension_over_chunks(x):
    parts = [c.relu() for c in x.chunk(3)]
    return ember.cat(parts, dim=1)


@theme.fn(lambda g: g.randn(4), trains=True)
def dict_comprehension(x):
    d = {f"p{i}": x**i for i in range(3)}
    return d["p0"] + d["p1"] * d["p2"]


@theme.fn(lambda g: g.randn(4), trains=True)
def generator_expression_to_sum(x):
    return sum(x[i] * i for i in range(4))


@theme.fn(lambda g: g.randn(2, 3), trains=True)
def nested_comprehension(x):
    grid = [[x * (i + j) for j in range(2)] for i in range(2)]
    return ember.stack([ember.stack(row) for row in grid])


@theme.fn(lambda g: g.randn(5))
def comprehension_with_filter(x):
    keep = [i for i in range(x.shape[0]) if i % 2 == 0]
    return x[keep] * 2


@theme.fn(lambda g: [g.randn(3) for _ in range(3)], trains=True)
def comprehension_over_argument(xs):
    return ember.stack([t * k for k, t in enumerate(xs)]).sum(0)


@theme.fn(lambda g: g.randn(4, 4))
def set_comprehension_of_sizes(x):
    sizes = {d for d in x.shape}
    return x * len(sizes)


@theme.fn(lambda g: g.randn(3), trains=True)
def comprehension_reads_closure(x):
    scale = 0.5

    def shifted(n):
        return [x * scale + i for i in range(n)]

    return ember.stack(shifted(3))


@theme.fn(lambda g: g.randn(3, 2), trains=True)
def any_all_on_python_values(x):
    dims = [s for s in x.shape]
    if all(d > 1 for d in dims) and not any(d > 10 for d in dims):
        return x.exp()
    return x
