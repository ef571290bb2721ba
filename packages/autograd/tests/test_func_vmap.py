"""ember.func.vmap: equal to a Python loop over op_db's samples, in_dims on every dim and None, randomness, fallbacks."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.func import debug, vmap
from ember.func._batching_rules import LOOPED, RULES, has_rule
from ember.testing import op_db

B = 3


def _other_sample(t):
    """Another sample of the same shape and domain: ``t``'s elements in reverse order."""
    if t.numel() <= 1:
        return t.clone()
    return t.reshape(-1).flip(0).reshape(t.shape)


def _dtype_for(info):
    for dtype in (ember.float64, ember.float32, ember.int64):
        if dtype in info.dtypes:
            return dtype
    return info.dtypes[0]


def _tensor_positions(sample):
    values = [sample.input, *sample.args]
    return [i for i, v in enumerate(values) if isinstance(v, ember.Tensor)]


def _as_numpy(x):
    if isinstance(x, ember.Tensor):
        return x.detach().numpy()
    return np.asarray(x)


def _compare(actual, expected):
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _compare(a, e)
        return
    a, e = _as_numpy(actual), _as_numpy(expected)
    assert a.shape == e.shape, (a.shape, e.shape)
    if a.dtype.kind in "fc":
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6, equal_nan=True)
    else:
        np.testing.assert_array_equal(a, e)


def _stack(results):
    first = results[0]
    if isinstance(first, (tuple, list)):
        return type(first)(_stack([r[i] for r in results]) for i in range(len(first)))
    return ember.stack(results)


#: ops whose op_db samples this test cannot batch meaningfully, with the reason
_SKIP = {
    "searchsorted": "needs each sample's sequence sorted; reversing the elements breaks that",
    "bucketize": "needs each sample's boundaries sorted; reversing the elements breaks that",
    "index_put": "in-place writes with accumulate depend on duplicate handling order",
    "as_strided": "vmap counts storage_offset from each sample's start (torch.func), a loop of views from the "
                  "storage's; test_as_strided_offsets_count_per_sample checks it",
}


#: ops that PyTorch's vmap refuses when the argument at this position is batched (the output's shape would
#: depend on each sample's values): vmap raises there
_REFUSED = {"masked_select": 1}


def _cases():
    for name, info in sorted(op_db.items()):
        op = info.op
        if "random" in op.tags or op.kind == "other" or "factory" in op.tags or name in _SKIP:
            continue
        yield pytest.param(name, id=name)


def _samples(info):
    dtype = _dtype_for(info)
    out = []
    for sample in info.sample_inputs(info, "cpu", dtype, False):
        if sample.data_dependent or not _tensor_positions(sample):
            continue
        if any(isinstance(v, ember.Tensor) and v.ndim == 0 for v in (sample.input, *sample.args)) and len(out) > 2:
            continue
        if any(isinstance(v, (list, tuple)) and any(isinstance(w, ember.Tensor) for w in v)
               for v in (sample.input, *sample.args)):
            continue  # tensors inside lists: covered by cat/stack's own tests below
        out.append(sample)
        if len(out) == 3:
            break
    return out


@pytest.mark.parametrize("name", list(_cases()))
def test_vmap_matches_loop_over_op_db(name):
    info = op_db[name]
    op = info.op
    for sample in _samples(info):
        values = [sample.input, *sample.args]
        positions = _tensor_positions(sample)
        for batched in [positions[:1], positions]:  # the first tensor alone (others None), then every tensor
            for where in ("first", "last"):
                batches = {}
                for p in batched:
                    t = values[p]
                    stacked = ember.stack([t] + [_other_sample(t)] * (B - 1) if B > 1 else [t])
                    if where == "last" and t.ndim > 0:
                        stacked = stacked.movedim(0, -1).contiguous()
                    batches[p] = stacked
                dims = tuple((-1 if where == "last" and values[p].ndim > 0 else 0) if p in batches else None
                             for p in range(len(values)))

                def call(*vals):
                    return op(*vals, **sample.kwargs)

                args = [batches.get(p, v) for p, v in enumerate(values)]
                try:
                    expected = _stack([
                        call(*[(batches[p].select(dims[p] % batches[p].ndim, b) if p in batches else v)
                               for p, v in enumerate(values)])
                        for b in range(B)
                    ])
                except (RuntimeError, ValueError, IndexError, TypeError):
                    continue  # the permuted sample is not a valid input of the op
                refused = _REFUSED.get(name)
                if refused is not None and refused < len(dims) and dims[refused] is not None:
                    with pytest.raises(RuntimeError, match="differently shaped"):
                        vmap(call, in_dims=dims)(*args)
                    continue
                actual = vmap(call, in_dims=dims)(*args)
                _compare(actual, expected)


def test_every_op_is_vectorised_or_listed():
    from ember._ops._registry import registry

    unlisted = [op.name for op in registry.values()
                if op.kind in ("function", "view") and "factory" not in op.tags and "random" not in op.tags
                and not has_rule(op) and op.name not in LOOPED]
    assert unlisted == [], unlisted


def test_vectorised_ops_do_not_fall_back():
    x = ember.randn(4, 3, 5)
    w = ember.randn(2, 5)
    with debug.fallbacks() as report:
        vmap(lambda t: (t.sin() * 2 + 1).sum(-1).softmax(0))(x)
        vmap(lambda t: ember.nn.functional.linear(t, w).relu().mean())(x)
        vmap(lambda t: t.transpose(0, 1).reshape(-1)[2:7].cumsum(0))(x)
        vmap(lambda t: t @ t.t())(x)
        vmap(lambda t: ember.cat([t, t * 2], 1).amax(1))(x)
    assert dict(report) == {}


def test_fallback_is_counted_and_correct():
    x = ember.randn(6, 4)
    with debug.fallbacks() as report:  # a batch that is not contiguous per sample: as_strided runs per sample
        out = vmap(lambda t: t.as_strided((2, 2), (1, 2)), in_dims=1)(x)
    assert report["as_strided"] == 1
    expected = ember.stack([r.as_strided((2, 2), (1, 2)) for r in x.unbind(1)])
    np.testing.assert_allclose(out.numpy(), expected.numpy())


def test_as_strided_offsets_count_per_sample():
    x = ember.randn(4, 6)
    with debug.fallbacks() as report:
        out = vmap(lambda t: t.as_strided((2, 2), (1, 2), 1))(x)
        plain = vmap(lambda t: t.as_strided((3,), (2,)))(x)
    assert dict(report) == {}
    # each sample as its own storage: the offset counts from its first element (torch.func's semantics)
    expected = ember.stack([r.clone().as_strided((2, 2), (1, 2), 1) for r in x.unbind(0)])
    np.testing.assert_array_equal(out.numpy(), expected.numpy())
    np.testing.assert_array_equal(plain.numpy(), x.numpy()[:, ::2])
    with pytest.raises(RuntimeError, match="storage_offset"):
        vmap(lambda t: t.as_strided((2,), (1,), 1), in_dims=1)(x)


def test_in_dims_out_dims_and_pytrees():
    x, y = ember.randn(3, 4), ember.randn(4, 5)
    out = vmap(lambda a, b: a @ b, in_dims=(1, None), out_dims=1)(x.t().contiguous(), y)
    np.testing.assert_allclose(out.numpy(), (x @ y).t().numpy(), rtol=1e-5, atol=1e-6)
    tree = {"a": x, "b": (y,)}
    out = vmap(lambda d: d["a"].sum() + d["b"][0].sum(), in_dims=({"a": 0, "b": (None,)},))(tree)
    np.testing.assert_allclose(out.numpy(), (x.sum(1) + y.sum()).numpy(), rtol=1e-5)
    a, b = vmap(lambda t: (t * 2, t.sum()))(x)
    np.testing.assert_allclose(b.numpy(), x.sum(1).numpy(), rtol=1e-5)


def test_nested_vmap_and_chunks():
    x = ember.randn(3, 4, 5)
    out = vmap(vmap(lambda r: r.exp().sum()))(x)
    np.testing.assert_allclose(out.numpy(), x.exp().sum(-1).numpy(), rtol=1e-5)
    out = vmap(lambda r: r * 3, chunk_size=2)(x)
    np.testing.assert_allclose(out.numpy(), (x * 3).numpy())


def test_vmap_errors():
    with pytest.raises(ValueError, match="same size"):
        vmap(lambda a, b: a + b)(ember.ones(3), ember.ones(4))
    with pytest.raises(ValueError, match="randomness"):
        vmap(ember.sin, randomness="sometimes")
    with pytest.raises(ValueError, match="at least one input"):
        vmap(ember.sin, in_dims=None)(ember.ones(3))
    with pytest.raises(RuntimeError, match="values of a batched tensor"):
        vmap(lambda t: t.sum().item())(ember.ones(3, 2))
    with pytest.raises(RuntimeError, match="not possible"):
        vmap(lambda t: ember.zeros(2).add_(t))(ember.ones(3, 2))


def test_inplace_on_batched():
    x = ember.randn(3, 4)
    out = vmap(lambda t: t.clone().mul_(2).add_(1))(x)
    np.testing.assert_allclose(out.numpy(), (x * 2 + 1).numpy(), rtol=1e-6)


def test_randomness_modes():
    x = ember.ones(5, 1000)
    with pytest.raises(RuntimeError, match="randomness"):
        vmap(lambda t: ember.nn.functional.dropout(t, 0.5))(x)
    with pytest.raises(RuntimeError, match="randomness"):
        vmap(lambda t: t + ember.rand(1000))(x)
    same = vmap(lambda t: ember.nn.functional.dropout(t, 0.5), randomness="same")(x)
    assert all(bool((same[i] == same[0]).all()) for i in range(5))
    different = vmap(lambda t: ember.nn.functional.dropout(t, 0.5), randomness="different")(x)
    assert not bool((different[1] == different[0]).all())
    assert 0.3 < float((different == 0).float().mean()) < 0.7
    noise = vmap(lambda t: t + ember.rand(1000), randomness="different")(x)
    assert noise.shape == (5, 1000) and not bool((noise[1] == noise[0]).all())
    noise = vmap(lambda t: t + ember.rand(1000), randomness="same")(x)
    assert bool((noise[1] == noise[0]).all())
    # not training: nothing is drawn, so no error
    vmap(lambda t: ember.nn.functional.dropout(t, 0.5, training=False))(x)


def test_rule_table_keys_are_registry_ops():
    from ember._ops._registry import Op

    assert all(isinstance(op, Op) for op in RULES)


def test_stft_frame_prims_fold_the_batch():
    frames, overlap_add = ember._ops.registry["_stft_frames"], ember._ops.registry["_stft_frames_backward"]
    x = ember.randn(3, 2, 20, dtype=ember.float64)
    with debug.fallbacks() as report:
        out = vmap(lambda t: frames(t, 8, 4, 4, "reflect"))(x)
        back = vmap(lambda f: overlap_add(f, 20, 4, 4, "reflect"))(out)
    assert dict(report) == {}
    expected = [frames(t, 8, 4, 4, "reflect") for t in x.unbind(0)]
    np.testing.assert_allclose(out.numpy(), ember.stack(expected).numpy())
    np.testing.assert_allclose(back.numpy(), ember.stack([overlap_add(f, 20, 4, 4, "reflect") for f in expected]).numpy())


@pytest.mark.parametrize("x_dim, wb_dim", [(0, None), (0, 0), (1, 0), (None, 0)])
def test_eval_batch_norm_rule_matches_a_loop(x_dim, wb_dim):
    # the eval-mode rule folds the statistics into one scale and shift per sample; per-sample weights included
    rng = np.random.default_rng(4)
    x = ember.from_numpy(rng.standard_normal((3, 2, 4, 5, 5)))
    if x_dim is None:
        x = x[0]
    elif x_dim == 1:
        x = x.movedim(0, 1).contiguous()  # the batch along dim 1
    w, b = ember.from_numpy(rng.standard_normal((3, 4))), ember.from_numpy(rng.standard_normal((3, 4)))
    if wb_dim is None:
        w, b = w[0], b[0]
    mean, var = ember.from_numpy(rng.standard_normal(4)), ember.from_numpy(rng.random(4) + 0.5)

    def f(x, w, b):
        return ember.nn.functional.batch_norm(x, mean, var, w, b, training=False, eps=1e-3)

    with debug.fallbacks() as report:
        out = vmap(f, in_dims=(x_dim, wb_dim, wb_dim))(x, w, b)
    assert dict(report) == {}
    pick = lambda t, d, i: t if d is None else t.select(d, i)  # noqa: E731
    expected = ember.stack([f(pick(x, x_dim, i), pick(w, wb_dim, i), pick(b, wb_dim, i)) for i in range(3)])
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-12, atol=1e-12)


def test_dropout_outside_training_returns_its_input():
    x = ember.from_numpy(np.random.default_rng(5).standard_normal((3, 4)))
    same = []

    def f(t):
        out = ember.nn.functional.dropout(t, 0.5, training=False)
        same.append(out is t)  # as PyTorch's dropout: the input itself, no copy
        return out * 2

    np.testing.assert_allclose(vmap(f)(x).numpy(), (x * 2).numpy())
    assert same == [True]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("rows", [None, 4])
def test_cross_entropy_rule_matches_a_loop(reduction, rows):
    # class-index targets (one ignored), samples of (C,) or (N, C) logits; the target batched or shared
    rng = np.random.default_rng(6)
    shape = (3, 5) if rows is None else (3, rows, 5)
    x = ember.from_numpy(rng.standard_normal(shape))
    t = ember.from_numpy(rng.integers(0, 5, shape[:-1]))
    if rows is not None:
        t[1, 2] = -100  # ignore_index

    def f(x, t):
        return ember.nn.functional.cross_entropy(x, t, reduction=reduction)

    for t_dim in (0, None):
        tt = t if t_dim == 0 else t[1]
        with debug.fallbacks() as report:
            out = vmap(f, in_dims=(0, t_dim))(x, tt)
        assert dict(report) == {}
        expected = ember.stack([f(x[i], tt if t_dim is None else tt[i]) for i in range(3)])
        np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-12, atol=1e-12)


def test_boolean_masks_per_sample_raise_and_shared_masks_vectorise():
    rng = np.random.default_rng(7)
    x = ember.from_numpy(rng.standard_normal((3, 4, 5)))
    # a mask per sample selects a different number of elements from each: PyTorch's error
    with pytest.raises(RuntimeError, match="Attempting to batch over indexing with a boolean mask"):
        vmap(lambda t: t[t > 0])(x)
    with pytest.raises(RuntimeError, match="Attempting to batch over indexing with a boolean mask"):
        vmap(lambda t: t.clone().__setitem__(t > 0, 0.0))(x)
    # one mask for every sample: the same elements of each, in one call
    m2 = ember.from_numpy(rng.random((4, 5)) > 0.5)
    for f in (lambda t: t[m2], lambda t: t[:, m2[0]], lambda t: t[m2[:, 0], ember.tensor([0, 2])]):
        with debug.fallbacks() as report:
            out = vmap(f)(x)
        assert dict(report) == {}
        np.testing.assert_array_equal(out.numpy(), ember.stack([f(x[i]) for i in range(3)]).numpy())


def test_views_the_batch_layout_cannot_take_raise_as_in_pytorch():
    x = ember.from_numpy(np.random.default_rng(8).standard_normal((3, 4, 5)))
    # the samples along dim 1: each (3, 5) sample spans two blocks of memory, so view cannot merge its dims
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        vmap(lambda t: t.view(-1), in_dims=1)(x)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        vmap(lambda t: t.t().view(-1))(x)
    # views the samples' memory can take, and reshape (which copies where it must), work
    np.testing.assert_array_equal(vmap(lambda t: t.view(-1), in_dims=2)(x).numpy(),
                                  x.movedim(2, 0).reshape(5, 12).numpy())
    np.testing.assert_array_equal(vmap(lambda t: t.reshape(-1), in_dims=1)(x).numpy(),
                                  x.movedim(1, 0).reshape(4, 15).numpy())


def _mixed_rank_cases():
    rng = np.random.default_rng(9)

    def t(*shape):
        return ember.from_numpy(rng.standard_normal(shape))

    eye = ember.eye(4, dtype=ember.float64) * 4
    batch_a, one_a = t(3, 2, 4, 4) + eye, t(3, 4, 4) + eye  # per sample: a batch of two matrices, or one
    solve = ember.linalg.solve
    return [
        ("solve, a vector for a batch of matrices", solve, batch_a, t(3, 4)),
        ("solve, a batch of matrices for one matrix", solve, one_a, t(3, 2, 4, 2)),
        ("solve, one matrix for a batch of matrices", solve, batch_a, t(3, 4, 2)),
        ("solve_ex", lambda a, b: ember.linalg.solve_ex(a, b).result, batch_a, t(3, 4)),
        ("solve_triangular", lambda a, b: ember.linalg.solve_triangular(a.triu(), b, upper=True), one_a, t(3, 2, 4, 2)),
        ("lu_solve", lambda a, b: ember.linalg.lu_solve(*ember.linalg.lu_factor(a), b), batch_a, t(3, 4, 2)),
    ]


@pytest.mark.parametrize("case", range(6))
@pytest.mark.parametrize("dims", [(0, 0), (0, None), (None, 0)])
def test_linalg_operands_of_different_ranks_are_vectorised(case, dims):
    _, f, a, b = _mixed_rank_cases()[case]
    a, b = (a if dims[0] == 0 else a[0]), (b if dims[1] == 0 else b[1])
    with debug.fallbacks() as report:
        out = vmap(f, in_dims=dims)(a, b)
    assert dict(report) == {}
    expected = ember.stack([f(a[i] if dims[0] == 0 else a, b[i] if dims[1] == 0 else b) for i in range(3)])
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-10, atol=1e-12)


def test_linalg_solve_under_vmap_names_the_singular_sample():
    a = ember.eye(2, dtype=ember.float64).repeat(3, 1, 1)
    a[1] = 0.0
    with pytest.raises(ember.linalg.LinAlgError, match="singular"):
        vmap(ember.linalg.solve)(a, ember.ones(3, 2, dtype=ember.float64))


@pytest.mark.parametrize("sample_dims", [2, 3])
@pytest.mark.parametrize("masks", ["none", "padding", "attn3d"])
@pytest.mark.parametrize("need_weights", [True, False])
def test_multi_head_attention_folds_the_batch(sample_dims, masks, need_weights):
    rng = np.random.default_rng(10)
    E, H, L, S, N = 8, 2, 4, 5, 2
    w_in, b_in = ember.from_numpy(rng.standard_normal((3 * E, E)) * 0.3), ember.from_numpy(rng.standard_normal(3 * E))
    w_out, b_out = ember.from_numpy(rng.standard_normal((E, E)) * 0.3), ember.from_numpy(rng.standard_normal(E))
    lead = (N,) if sample_dims == 3 else ()
    q = ember.from_numpy(rng.standard_normal((3, L, *lead, E)))
    kv = ember.from_numpy(rng.standard_normal((3, S, *lead, E)))
    padding = ember.from_numpy(rng.random((3, *lead, S)) > 0.7) if masks == "padding" else None
    if padding is not None:
        padding[..., 0] = False  # no row fully masked
    attn = ember.from_numpy(rng.standard_normal((N * H if sample_dims == 3 else H, L, S))) if masks == "attn3d" else None

    def f(q, kv, padding):
        return ember.nn.functional.multi_head_attention_forward(
            q, kv, kv, E, H, w_in, b_in, None, None, False, 0.0, w_out, b_out, training=False,
            key_padding_mask=padding, need_weights=need_weights, attn_mask=attn)

    dims = (0, 0, None if padding is None else 0)
    with debug.fallbacks() as report:
        out, weights = vmap(f, in_dims=dims)(q, kv, padding)
    assert dict(report) == {}
    looped = [f(q[i], kv[i], None if padding is None else padding[i]) for i in range(3)]
    np.testing.assert_allclose(out.numpy(), ember.stack([o for o, _ in looped]).numpy(), rtol=1e-10, atol=1e-12)
    if need_weights:
        np.testing.assert_allclose(weights.numpy(), ember.stack([w for _, w in looped]).numpy(), rtol=1e-10,
                                   atol=1e-12)
    else:
        assert weights is None


def test_cached_binding_matches_inspect_over_the_registry():
    # batch_call binds every batched call from a cached plan of the op's signature: same result as Op.normalize
    from ember._ops._registry import registry
    from ember.func._batching_rules import _normalize

    def bind(fn, op, args, kwargs):
        try:
            args, kwargs = fn(op, args, dict(kwargs))
            return tuple(args), dict(kwargs)
        except TypeError:
            return "TypeError"

    checked = 0
    for op in registry.values():
        params = list(op._call_signature.parameters.values())
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        keyword_only = [p for p in params if p.kind is p.KEYWORD_ONLY]
        calls = [(("a0",), {"no_such_argument": 1})]
        for n in range(len(positional) + 1):
            args = tuple(f"a{i}" for i in range(n))
            calls += [(args, {}), (args + ("v1", "v2"), {})]
            calls += [(args, {p.name: "kw"}) for p in positional[n:][:2] + keyword_only[:2]]
        for args, kwargs in calls:
            expected = bind(lambda op, a, k: op.normalize(a, k), op, args, kwargs)
            assert bind(_normalize, op, args, kwargs) == expected, (op.name, args, kwargs)
            checked += 1
    assert checked > 1000


def test_contiguous_gives_samples_a_view_can_take():
    # as in PyTorch: is_contiguous tells the samples' real layout, and contiguous() makes a view possible
    x = ember.from_numpy(np.random.default_rng(11).standard_normal((3, 4, 5)))
    seen = []

    def f(t):
        seen.append((t.is_contiguous(), t.t().is_contiguous()))
        return t.t().contiguous().view(-1)

    out = vmap(f)(x)
    np.testing.assert_array_equal(out.numpy(), x.transpose(1, 2).reshape(3, 20).numpy())
    assert vmap(lambda t: t.contiguous().view(-1), in_dims=1)(x).shape == (4, 15)
    vmap(lambda t: seen.append(t.is_contiguous()) or t, in_dims=1)(x)
    assert seen == [(True, False), False]


def test_randperm_with_randomness_different_gives_each_sample_a_permutation():
    ember.manual_seed(0)
    out = vmap(lambda x: x + ember.randperm(6), randomness="different")(ember.zeros(8, 6, dtype=ember.int64))
    rows = [tuple(r) for r in out.tolist()]
    assert all(sorted(r) == list(range(6)) for r in rows)  # each row is a permutation of 0..5
    assert len(set(rows)) > 1  # and they differ (8 equal draws of 720 permutations: probability 720**-7)
    assert out.dtype == ember.int64
    same = vmap(lambda x: x + ember.randperm(6), randomness="same")(ember.zeros(8, 6, dtype=ember.int64))
    assert len({tuple(r) for r in same.tolist()}) == 1


@pytest.mark.parametrize("out_dims", [2, 5, -3, -7])
def test_out_dims_out_of_range_raises_as_pytorch(out_dims):
    x = ember.arange(12.0).reshape(3, 4)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\]"):
        vmap(lambda a: a, out_dims=out_dims)(x)
    with pytest.raises(IndexError, match="Dimension out of range"):  # an output that is the same for every sample
        vmap(lambda a: ember.ones(4), out_dims=out_dims)(x)


def test_out_dims_in_range():
    x = ember.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(vmap(lambda a: a * 2, out_dims=1)(x).numpy(), (x * 2).numpy().T)
    np.testing.assert_array_equal(vmap(lambda a: a * 2, out_dims=-1)(x).numpy(), (x * 2).numpy().T)
    np.testing.assert_array_equal(vmap(lambda a: a * 2, out_dims=-2)(x).numpy(), (x * 2).numpy())


@pytest.mark.parametrize("index", [lambda a, i: a[i], lambda a, i: a[:, i], lambda a, i: a[i, 1:]])
def test_indexing_with_a_batched_zero_dim_integer_matches_a_loop(index):
    a = ember.randn(3, 4, 5)
    i = ember.tensor([0, 3, 1])
    got = vmap(index)(a, i)
    want = ember.stack([index(a[k], int(i[k])) for k in range(3)])
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    shared = vmap(index, in_dims=(None, 0))(a[0], i)
    np.testing.assert_array_equal(shared.numpy(), ember.stack([index(a[0], int(k)) for k in i]).numpy())


def test_replace_all_batch_norm_modules_lets_training_batch_norm_run_under_vmap():
    from ember.func import replace_all_batch_norm_modules_

    model = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4), ember.nn.ReLU())
    x = ember.randn(5, 6, 3)  # 5 vmapped groups of 6 samples
    with pytest.raises(RuntimeError):  # running statistics would get a value per group
        vmap(model)(x)
    assert replace_all_batch_norm_modules_(model) is model
    bn = model[1]
    assert bn.running_mean is None and bn.running_var is None and not bn.track_running_stats
    got = vmap(model)(x)
    want = ember.stack([model(x[k]) for k in range(5)])  # batch statistics of each group
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)

