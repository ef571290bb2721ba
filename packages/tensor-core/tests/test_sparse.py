"""Sparse tensors (ember.sparse): values against scipy.sparse and numpy, errors, printing, save/load."""

import numpy as np
import pytest
import scipy.sparse

import ember
from ember.serialization import SerializationError
from ember.sparse import SparseTensor


def _random_coo(rng, shape, nnz, duplicates=False, dtype=np.float64):
    """Indices (2, nnz) and values of a random matrix; with duplicates, some positions repeat."""
    rows = rng.integers(0, shape[0], nnz)
    cols = rng.integers(0, shape[1], nnz)
    if duplicates and nnz > 2:
        rows[-2:], cols[-2:] = rows[0], cols[0]
    values = rng.standard_normal(nnz).astype(dtype)
    return np.stack([rows, cols]), values


def _scipy(indices, values, shape):
    return scipy.sparse.coo_array((values, (indices[0], indices[1])), shape=shape).toarray()


# -- construction and metadata ---------------------------------------------------------------


def test_coo_metadata_and_layouts():
    s = ember.sparse_coo_tensor([[0, 1], [2, 0]], [3.0, 4.0], (2, 3))
    assert isinstance(s, ember.Tensor) and isinstance(s, SparseTensor)
    assert s.layout is ember.sparse_coo and isinstance(s.layout, ember.layout)
    assert ember.zeros(2).layout is ember.strided
    assert s.is_sparse and not s.is_sparse_csr and not ember.zeros(2).is_sparse
    assert s.shape == (2, 3) and s.dtype is ember.float32 and s.device == ember.device("cpu")
    assert (s.sparse_dim(), s.dense_dim(), s._nnz(), s.ndim, s.numel()) == (2, 0, 2, 2, 6)
    assert ember.zeros(2, 3).sparse_dim() == 0 and ember.zeros(2, 3).dense_dim() == 2


def test_empty_index_lists():
    s = ember.sparse_coo_tensor([[], []], [], (2, 3))
    assert s._nnz() == 0 and s._indices().dtype is ember.int64 and s.dtype is ember.float32
    np.testing.assert_array_equal(s.to_dense().numpy(), np.zeros((2, 3)))


def test_size_is_inferred_from_indices():
    s = ember.sparse_coo_tensor([[0, 4], [2, 0]], ember.ones(2, 3))
    assert s.shape == (5, 3, 3) and s.dense_dim() == 1


@pytest.mark.parametrize("duplicates", [False, True])
def test_to_dense_and_coalesce_match_scipy(duplicates):
    rng = np.random.default_rng(0)
    indices, values = _random_coo(rng, (5, 7), 12, duplicates)
    s = ember.sparse_coo_tensor(indices, values, (5, 7))
    expected = _scipy(indices, values, (5, 7))
    np.testing.assert_allclose(s.to_dense().numpy(), expected, rtol=1e-12)
    c = s.coalesce()
    assert c.is_coalesced()
    reference = scipy.sparse.coo_array((values, (indices[0], indices[1])), shape=(5, 7))
    reference.sum_duplicates()  # sorts row-major and sums duplicates, as coalesce
    np.testing.assert_array_equal(c.indices().numpy(), np.stack([reference.row, reference.col]))
    np.testing.assert_allclose(c.values().numpy(), reference.data, rtol=1e-12)


def test_uncoalesced_indices_and_values_raise():
    s = ember.sparse_coo_tensor([[0, 0], [1, 1]], [1.0, 2.0], (2, 2))
    assert not s.is_coalesced()
    with pytest.raises(RuntimeError, match="uncoalesced"):
        s.values()
    with pytest.raises(RuntimeError, match="uncoalesced"):
        s.indices()
    np.testing.assert_array_equal(s._values().numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(s._indices().numpy(), [[0, 0], [1, 1]])


def test_dense_to_sparse_roundtrip_and_hybrid():
    x = ember.tensor([[0.0, 2.0, 0.0], [3.0, 0.0, 4.0]])
    s = x.to_sparse()
    assert s.is_coalesced()
    np.testing.assert_array_equal(s.indices().numpy(), np.stack(np.nonzero(x.numpy())))
    np.testing.assert_array_equal(s.values().numpy(), [2.0, 3.0, 4.0])
    np.testing.assert_array_equal(s.to_dense().numpy(), x.numpy())
    h = x.to_sparse(1)  # rows are sparse, each stored row dense
    assert (h.sparse_dim(), h.dense_dim(), h._nnz()) == (1, 1, 2)
    np.testing.assert_array_equal(h.to_dense().numpy(), x.numpy())
    assert x.to_dense() is x


def test_csr_from_coo_matches_scipy():
    rng = np.random.default_rng(1)
    indices, values = _random_coo(rng, (6, 4), 10, duplicates=True)
    s = ember.sparse_coo_tensor(indices, values, (6, 4))
    csr = s.to_sparse_csr()
    reference = scipy.sparse.csr_array((values, (indices[0], indices[1])), shape=(6, 4))
    reference.sum_duplicates()
    assert csr.layout is ember.sparse_csr and csr.is_sparse_csr
    np.testing.assert_array_equal(csr.crow_indices().numpy(), reference.indptr)
    np.testing.assert_array_equal(csr.col_indices().numpy(), reference.indices)
    np.testing.assert_allclose(csr.values().numpy(), reference.data, rtol=1e-12)
    np.testing.assert_allclose(csr.to_dense().numpy(), reference.toarray(), rtol=1e-12)
    back = csr.to_sparse_coo()
    assert back.is_coalesced()
    np.testing.assert_allclose(back.to_dense().numpy(), reference.toarray(), rtol=1e-12)
    assert s.to_sparse(layout=ember.sparse_csr).layout is ember.sparse_csr


def test_sparse_csr_tensor():
    s = ember.sparse_csr_tensor([0, 2, 3], [0, 2, 1], [1.0, 2.0, 3.0], (2, 3))
    np.testing.assert_array_equal(s.to_dense().numpy(), [[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]])
    with pytest.raises(RuntimeError, match="crow_indices"):
        ember.sparse_csr_tensor([0, 3, 2], [0, 2, 1], [1.0, 2.0, 3.0], (2, 3))
    with pytest.raises(RuntimeError, match="col_indices"):
        ember.sparse_csr_tensor([0, 2, 3], [0, 5, 1], [1.0, 2.0, 3.0], (2, 3))


@pytest.mark.parametrize(
    "indices, values, size, match",
    [
        ([[0, 2]], [1.0, 2.0], (2,), "size is inconsistent"),
        ([[0, -1]], [1.0, 2.0], (2,), "negative index"),
        ([[0, 1]], [1.0], (2,), "same number of elements"),
        ([0, 1], [1.0, 2.0], (2,), "sparse_dim x nnz"),
        ([[0, 1]], [1.0, 2.0], (2, 2), "values has incorrect size|number of dimensions"),
        (ember.tensor([[0.0, 1.0]]), [1.0, 2.0], (2,), "int64"),
    ],
)
def test_coo_construction_errors(indices, values, size, match):
    with pytest.raises(RuntimeError, match=match):
        ember.sparse_coo_tensor(indices, values, size)


def test_dense_tensor_has_no_sparse_parts():
    x = ember.zeros(2, 2)
    for name in ("indices", "values", "coalesce", "_indices", "_values", "is_coalesced"):
        with pytest.raises(RuntimeError, match="sparse coordinate"):
            getattr(x, name)()
    with pytest.raises(RuntimeError, match="CSR"):
        x.crow_indices()


# -- products: values against scipy ------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128, np.int64])
@pytest.mark.parametrize("duplicates", [False, True])
def test_sparse_dense_products_match_scipy(dtype, duplicates):
    rng = np.random.default_rng(2)
    indices, values = _random_coo(rng, (5, 4), 9, duplicates)
    values = (values * 10).astype(dtype)
    dense = (rng.standard_normal((4, 3)) * 10).astype(dtype)
    left = (rng.standard_normal((2, 5)) * 10).astype(dtype)
    matrix = _scipy(indices, values, (5, 4))
    s = ember.sparse_coo_tensor(indices, values, (5, 4))
    tolerance = dict(rtol=1e-5, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-12)
    for result in (ember.sparse.mm(s, ember.tensor(dense)), ember.mm(s, ember.tensor(dense)),
                   s @ ember.tensor(dense), ember.spmm(s, ember.tensor(dense)),
                   ember.sparse.mm(s.to_sparse_csr(), ember.tensor(dense))):
        assert result.dtype is s.dtype and not isinstance(result, SparseTensor)
        np.testing.assert_allclose(result.numpy(), matrix @ dense, **tolerance)
    np.testing.assert_allclose((ember.tensor(left) @ s).numpy(), left @ matrix, **tolerance)
    np.testing.assert_allclose(ember.matmul(s, ember.tensor(dense[:, 0])).numpy(), matrix @ dense[:, 0], **tolerance)


def test_half_precision_product_accumulates_in_float32():
    rng = np.random.default_rng(3)
    indices, values = _random_coo(rng, (4, 6), 10)
    dense = rng.standard_normal((6, 2))
    s = ember.sparse_coo_tensor(indices, values, (4, 6), dtype=ember.float16)
    result = ember.sparse.mm(s, ember.tensor(dense, dtype=ember.float16))
    assert result.dtype is ember.float16
    exact = _scipy(indices, values.astype(np.float16).astype(np.float64), (4, 6)) @ dense.astype(np.float16)
    np.testing.assert_allclose(result.numpy().astype(np.float64), exact, rtol=2e-3, atol=2e-3)


def test_sparse_sparse_product():
    a = ember.tensor([[0.0, 2.0], [1.0, 0.0]])
    b = ember.tensor([[0.0, 0.0], [5.0, 1.0]])
    result = ember.sparse.mm(a.to_sparse(), b.to_sparse())
    assert result.is_sparse
    np.testing.assert_array_equal(result.to_dense().numpy(), a.numpy() @ b.numpy())


def test_addmm():
    rng = np.random.default_rng(4)
    indices, values = _random_coo(rng, (3, 4), 6)
    dense, bias = rng.standard_normal((4, 2)), rng.standard_normal((3, 2))
    s = ember.sparse_coo_tensor(indices, values, (3, 4))
    expected = 0.5 * bias + 2.0 * (_scipy(indices, values, (3, 4)) @ dense)
    for result in (ember.sparse.addmm(ember.tensor(bias), s, ember.tensor(dense), beta=0.5, alpha=2.0),
                   ember.addmm(ember.tensor(bias), s, ember.tensor(dense), beta=0.5, alpha=2.0)):
        np.testing.assert_allclose(result.numpy(), expected, rtol=1e-12)
    nan_bias = ember.full((3, 2), float("nan"), dtype=ember.float64)
    result = ember.sparse.addmm(nan_bias, s, ember.tensor(dense), beta=0)
    np.testing.assert_allclose(result.numpy(), _scipy(indices, values, (3, 4)) @ dense, rtol=1e-12)


@pytest.mark.parametrize(
    "a_shape, b_shape, match",
    [((3, 4), (5, 2), "cannot be multiplied"), ((3, 4), (4,), "must be a matrix")],
)
def test_product_errors(a_shape, b_shape, match):
    s = ember.zeros(a_shape).to_sparse()
    with pytest.raises(RuntimeError, match=match):
        ember.sparse.mm(s, ember.zeros(b_shape))


def test_product_dtype_mismatch():
    s = ember.ones(2, 2).to_sparse()
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.sparse.mm(s, ember.ones(2, 2, dtype=ember.float64))


# -- reductions, softmax, elementwise --------------------------------------------------------


def test_sum_matches_numpy():
    rng = np.random.default_rng(5)
    indices = np.stack([rng.integers(0, 3, 8), rng.integers(0, 4, 8), rng.integers(0, 2, 8)])
    values = rng.standard_normal((8, 2))
    s = ember.sparse_coo_tensor(indices, values, (3, 4, 2, 2))
    dense = s.to_dense().numpy()
    np.testing.assert_allclose(ember.sparse.sum(s).numpy(), dense.sum(), rtol=1e-12)
    np.testing.assert_allclose(s.sum().numpy(), dense.sum(), rtol=1e-12)
    for dim in (0, 1, (0, 2), (1, 3), (0, 1, 2)):
        result = ember.sparse.sum(s, dim)
        expected = dense.sum(axis=dim)
        got = result.to_dense().numpy() if isinstance(result, SparseTensor) else result.numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
        if isinstance(result, SparseTensor):
            assert result.is_coalesced()
    assert not isinstance(ember.sparse.sum(s, (0, 1, 2)), SparseTensor)


def _masked_softmax(dense, mask, axis, log=False):
    """Softmax over ``axis`` of the entries where ``mask`` is set; 0 (unspecified) elsewhere."""
    with np.errstate(divide="ignore", invalid="ignore"):  # slices without specified elements
        shifted = np.where(mask, dense, -np.inf)
        shifted = shifted - np.max(shifted, axis=axis, keepdims=True)
        exp = np.where(mask, np.exp(shifted), 0.0)
        total = exp.sum(axis=axis, keepdims=True)
        result = np.log(exp / total) if log else exp / total
    return np.where(mask, result, 0.0)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_over_specified_elements(dim, log):
    rng = np.random.default_rng(6)
    indices, values = _random_coo(rng, (4, 5), 11, duplicates=True)
    s = ember.sparse_coo_tensor(indices, values * 30, (4, 5))  # large values: the shift matters
    dense = s.to_dense().numpy()
    mask = _scipy(indices, np.ones_like(values), (4, 5)) > 0
    fn = ember.sparse.log_softmax if log else ember.sparse.softmax
    result = fn(s, dim)
    assert result.is_sparse and result._nnz() == int(mask.sum())
    np.testing.assert_allclose(result.to_dense().numpy(), _masked_softmax(dense, mask, dim, log), rtol=1e-10,
                               atol=1e-12)


def test_elementwise_ops_on_values():
    s = ember.sparse_coo_tensor([[0, 1, 0], [1, 0, 1]], [4.0, -9.0, 5.0], (2, 2))
    dense = s.to_dense().numpy()
    cases = [
        (s * 2, dense * 2), (3 * s, dense * 3), (s / 2, dense / 2), (-s, -dense),
        (ember.abs(s), np.abs(dense)), (s.relu(), np.maximum(dense, 0)), (ember.sqrt(ember.abs(s)), np.sqrt(np.abs(dense))),
        (s + s, 2 * dense), (s - s * 3, -2 * dense), (s * ember.full((2, 2), 2.0), 2 * dense),
        (s * s, dense * dense),
    ]
    for got, expected in cases:
        assert isinstance(got, SparseTensor)
        np.testing.assert_allclose(got.to_dense().numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose((ember.ones(2, 2) + s).numpy(), 1 + dense, rtol=1e-6)
    np.testing.assert_allclose(ember.add(ember.ones(2, 2), s, alpha=2).numpy(), 1 + 2 * dense, rtol=1e-6)


def test_transpose_and_t():
    s = ember.sparse_coo_tensor([[0, 1, 1], [2, 0, 1]], [1.0, 2.0, 3.0], (2, 3))
    for t in (s.t(), s.transpose(0, 1), s.T):
        assert t.shape == (3, 2)
        np.testing.assert_array_equal(t.to_dense().numpy(), s.to_dense().numpy().T)


def test_detach_clone_to():
    s = ember.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (3,), requires_grad=True)
    d = s.detach()
    assert not d.requires_grad and d.is_sparse
    c = d.clone()
    c._values().add_(1.0)  # a clone owns its values
    np.testing.assert_array_equal(d._values().numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(c.to_dense().numpy(), [2.0, 3.0, 0.0])
    x = s.to(ember.float64)
    assert x.dtype is ember.float64 and x.is_sparse and x.requires_grad
    assert s.to("cpu") is s and s.cpu() is s


def test_ops_without_sparse_implementation_raise():
    s = ember.ones(2, 2).to_sparse()
    with pytest.raises(NotImplementedError, match=r"ember\.exp does not support sparse COO.*to_dense"):
        ember.exp(s)
    with pytest.raises(NotImplementedError, match="sparse COO"):
        s.view(4)
    with pytest.raises(NotImplementedError, match="sparse CSR"):
        ember.exp(s.to_sparse_csr())
    with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported"):
        s + ember.ones(2, 2)
    with pytest.raises(TypeError, match="to_dense"):
        s.numpy()
    with pytest.raises(RuntimeError, match="sparse"):
        s.stride()
    with pytest.raises(TypeError, match="to_dense"):
        np.asarray(s._data)


def test_implementations_name_registry_ops():
    from ember import _ops
    from ember.sparse._dispatch import IMPLEMENTATIONS

    assert sorted(name for name in IMPLEMENTATIONS if name not in _ops.registry) == []


# -- printing ---------------------------------------------------------------------------------


def test_repr_coo():
    s = ember.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
    assert repr(s) == (
        "tensor(indices=tensor([[0, 1, 1],\n"
        "                       [2, 0, 2]]),\n"
        "       values=tensor([3., 4., 5.]),\n"
        "       size=(2, 3), nnz=3, layout=ember.sparse_coo)"
    )
    d = ember.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3), dtype=ember.float64,
                                requires_grad=True)
    assert repr(d).endswith(
        "       size=(2, 3), nnz=3, dtype=ember.float64, layout=ember.sparse_coo,\n"
        "       requires_grad=True)"
    )


def test_repr_csr_and_empty():
    s = ember.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3)).to_sparse_csr()
    assert repr(s) == (
        "tensor(crow_indices=tensor([0, 1, 3]),\n"
        "       col_indices=tensor([2, 0, 2]),\n"
        "       values=tensor([3., 4., 5.]), size=(2, 3), nnz=3,\n"
        "       layout=ember.sparse_csr)"
    )
    e = ember.sparse_coo_tensor(ember.zeros(2, 0, dtype=ember.int64), ember.zeros(0), (2, 3))
    assert repr(e) == (
        "tensor(indices=tensor([], size=(2, 0)),\n"
        "       values=tensor([], size=(0,)),\n"
        "       size=(2, 3), nnz=0, layout=ember.sparse_coo)"
    )


# -- save and load ----------------------------------------------------------------------------


def test_save_load_roundtrip(tmp_path):
    coo = ember.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
    uncoalesced = ember.sparse_coo_tensor([[0, 0], [1, 1]], [1.0, 2.0], (2, 2), dtype=ember.float64)
    csr = coo.coalesce().to_sparse_csr()
    leaf = ember.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (2,), requires_grad=True)
    path = tmp_path / "sparse.safetensors"
    ember.save({"coo": coo, "unc": uncoalesced, "csr": csr, "leaf": leaf, "dense": ember.ones(2)}, path)
    loaded = ember.load(path)
    for key, original in (("coo", coo), ("unc", uncoalesced), ("csr", csr), ("leaf", leaf)):
        got = loaded[key]
        assert isinstance(got, SparseTensor) and got.layout is original.layout and got.dtype is original.dtype
        assert got.shape == original.shape
        np.testing.assert_array_equal(got.to_dense().detach().numpy(), original.to_dense().detach().numpy())
    assert not loaded["unc"].is_coalesced() and loaded["coo"].is_coalesced() is coo.is_coalesced()
    assert loaded["leaf"].requires_grad and loaded["leaf"].is_leaf
    np.testing.assert_array_equal(loaded["dense"].numpy(), [1.0, 1.0])


@pytest.mark.parametrize(
    "record",
    [
        {"layout": "sparse_coo", "size": [2], "indices": [[0, 5]], "values": [1.0, 2.0], "coalesced": True},
        {"layout": "sparse_coo", "size": [2], "indices": [[1, 0]], "values": [1.0, 2.0], "coalesced": True},
        {"layout": "dense", "size": [2]},
        {"layout": "sparse_coo", "size": [2], "indices": [[0, 1]], "values": [1.0, 2.0]},
        {"layout": "sparse_csr", "size": [1, 2], "crow_indices": [0, 3], "col_indices": [0, 1],
         "values": [1.0, 2.0]},
    ],
)
def test_load_rejects_malformed_records(tmp_path, record):
    from ember.serialization import _EXTENSIONS_BY_NAME
    from ember.sparse._serialization import TYPE_NAME

    record = {k: ember.tensor(v) if isinstance(v, list) and k not in ("size",) else v for k, v in record.items()}
    path = tmp_path / "bad.safetensors"
    entry = _EXTENSIONS_BY_NAME[TYPE_NAME]
    original = entry.encode
    # write the record through the registered type, as a damaged or hostile file would hold it
    entry.encode = lambda t: record
    try:
        ember.save(ember.ones(1).to_sparse(), path)
    finally:
        entry.encode = original
    with pytest.raises(SerializationError):
        ember.load(path)


# -- CUDA (cupyx.scipy.sparse) ----------------------------------------------------------------


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.int64])
def test_cuda_products_match_cpu(dtype):
    rng = np.random.default_rng(7)
    indices, values = _random_coo(rng, (6, 5), 14, duplicates=True)
    dense = rng.standard_normal((5, 3)) * 4
    s = ember.sparse_coo_tensor(indices, values * 4, (6, 5), dtype=dtype)
    d = ember.tensor(dense, dtype=dtype)
    on_gpu = s.cuda()
    assert on_gpu.device.type == "cuda" and on_gpu._indices().device.type == "cuda"
    tolerance = dict(rtol=2e-3, atol=2e-2) if dtype is ember.float16 else dict(rtol=1e-5, atol=1e-5)
    cpu_result = ember.sparse.mm(s, d).to(ember.float64).numpy()
    np.testing.assert_allclose(ember.sparse.mm(on_gpu, d.cuda()).cpu().to(ember.float64).numpy(), cpu_result,
                               **tolerance)
    np.testing.assert_allclose((d.t().cuda() @ on_gpu.t()).cpu().to(ember.float64).numpy(), cpu_result.T,
                               **tolerance)
    np.testing.assert_allclose(on_gpu.to_dense().cpu().numpy(), s.to_dense().numpy())
    np.testing.assert_allclose(on_gpu.coalesce().to_sparse_csr().to_dense().cpu().numpy(), s.to_dense().numpy())


@pytest.mark.cuda
def test_cuda_softmax_and_sum():
    s = ember.sparse_coo_tensor([[0, 0, 1], [0, 2, 1]], [1.0, 2.0, 5.0], (2, 3))
    g = s.cuda()
    np.testing.assert_allclose(ember.sparse.softmax(g, 1).to_dense().cpu().numpy(),
                               ember.sparse.softmax(s, 1).to_dense().numpy(), rtol=1e-6)
    np.testing.assert_allclose(ember.sparse.sum(g, 0).to_dense().cpu().numpy(),
                               ember.sparse.sum(s, 0).to_dense().numpy())


def test_product_follows_in_place_changes_of_indices_and_values():
    s = ember.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2)).coalesce()
    d = ember.tensor([[1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_array_equal(ember.sparse.mm(s, d).numpy(), [[0.0, 1.0], [2.0, 0.0]])
    s._values().mul_(10)  # the cached pattern holds indices only
    np.testing.assert_array_equal(ember.sparse.mm(s, d).numpy(), [[0.0, 10.0], [20.0, 0.0]])
    s._indices()[1].copy_(ember.tensor([0, 1]))  # a new pattern (still sorted and unique)
    np.testing.assert_array_equal(ember.sparse.mm(s, d).numpy(), [[10.0, 0.0], [0.0, 20.0]])


def test_list_arguments_with_a_sparse_tensor_raise():
    s = ember.ones(2, 2).to_sparse()
    with pytest.raises(NotImplementedError, match=r"ember\.cat does not support sparse COO"):
        ember.cat([s, s])


def test_strided_operands_of_sparse_functions():
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(ember.sparse.mm(a, a).numpy(), a.numpy() @ a.numpy())
    np.testing.assert_array_equal(ember.spmm(a, a).numpy(), a.numpy() @ a.numpy())
    np.testing.assert_array_equal(ember.sparse.addmm(a, a, a).numpy(), a.numpy() + a.numpy() @ a.numpy())
    with pytest.raises(RuntimeError, match="sparse tensor"):
        ember.sparse.sum(a)
    with pytest.raises(RuntimeError, match="sparse tensor"):
        ember.sparse.softmax(a, 0)


@pytest.mark.parametrize(
    "factory",
    [
        lambda layout: ember.zeros(2, 3, layout=layout),
        lambda layout: ember.empty(2, layout=layout),
        lambda layout: ember.full((2,), 1.0, layout=layout),
        lambda layout: ember.zeros_like(ember.ones(2), layout=layout),
        lambda layout: ember.arange(3, layout=layout),
        lambda layout: ember.rand(2, layout=layout),
        lambda layout: ember.randn_like(ember.ones(2), layout=layout),
        lambda layout: ember.tril_indices(3, 3, layout=layout),
    ],
)
def test_factories_refuse_sparse_layouts_instead_of_ignoring_them(factory):
    # a sparse layout= once gave a dense tensor silently
    for layout in (ember.sparse_coo, ember.sparse_csr):
        with pytest.raises(NotImplementedError, match="sparse_coo_tensor"):
            factory(layout)
    with pytest.raises(TypeError, match="argument 'layout' must be ember.layout, not str"):
        factory("sparse")
    assert factory(ember.strided).layout is ember.strided
