"""The choice between CuPy's cuBLAS wrappers and ember's capture-safe calls (``ember.cuda._bf16._bound``), and the
capture module's errors, without a GPU (fake CuPy objects). ``test_cuda_graph_capture.py`` records real products."""

import types

import pytest

from ember.cuda import _bf16, _cublas_capture


def _fake_cupy(stream_ptr, capturing):
    runtime = types.SimpleNamespace(streamIsCapturing=lambda ptr: capturing, getDevice=lambda: 0)
    cuda = types.SimpleNamespace(
        device=types.SimpleNamespace(get_cublas_handle=lambda: 1234),
        get_current_stream=lambda: types.SimpleNamespace(ptr=stream_ptr),
        runtime=runtime,
    )
    return types.SimpleNamespace(cuda=cuda)


def test_a_capturing_stream_takes_the_capture_module(monkeypatch):
    bound = []
    monkeypatch.setattr(_cublas_capture, "bind", lambda handle, stream, device: bound.append((handle, stream, device)))
    wrappers, handle = _bf16._bound(_fake_cupy(77, capturing=True))
    assert wrappers is _cublas_capture and handle == 1234 and bound == [(1234, 77, 0)]


@pytest.mark.parametrize("stream_ptr", [0, 77])
def test_other_streams_take_cupys_wrappers(monkeypatch, stream_ptr):
    streams = []
    cupy_wrappers = types.SimpleNamespace(setStream=lambda handle, stream: streams.append((handle, stream)))
    monkeypatch.setattr(_bf16, "_cublas", lambda: cupy_wrappers)
    monkeypatch.setattr(_cublas_capture, "bind", lambda *a: pytest.fail("bound for capture"))
    # the legacy stream (0) is never asked whether it captures
    wrappers, handle = _bf16._bound(_fake_cupy(stream_ptr, capturing=stream_ptr == 0))
    assert wrappers is cupy_wrappers and streams == [(1234, stream_ptr)]


def test_without_libcublas_binding_says_so(monkeypatch):
    monkeypatch.setattr(_cublas_capture, "_state", {})
    monkeypatch.setattr(_cublas_capture, "_loaded_path", lambda: None)
    with pytest.raises(RuntimeError, match="libcublas is not loaded"):
        _cublas_capture.bind(1, 2, 0)


def test_a_failing_status_names_the_call():
    with pytest.raises(RuntimeError, match=r"cublasGemmEx failed during CUDA-graph capture \(cublasStatus_t 7\)"):
        _cublas_capture._check("cublasGemmEx", 7)
    _cublas_capture._check("cublasGemmEx", 0)
