"""GPU workloads (issue 8): ember's ``cuda`` device against PyTorch's on the same GPU, in one process.

Run with ``python benchmarks/run.py --device cuda`` (writes ``BENCHMARKS_CUDA.md``);
the CPU suite never runs these rows. Without CuPy or a GPU every row is skipped;
without a CUDA build of PyTorch the PyTorch column stays empty.

Every timed callable ends with a device synchronisation (``ember.cuda.synchronize()``
or ``torch.cuda.synchronize()``), so the wall time the runner reads is the GPU's
time, not the time to queue the work. The rows:

* ``cuda_add_16elem_launch``: the cost of one ``a + b`` on 16-element float32
  tensors, 100 calls then one synchronisation (the dispatcher's and the launch's
  overhead: the GPU itself needs a few microseconds per launch);
* ``cuda_add_2^28_f32`` / ``cuda_clone_2^28_f32``: a large pointwise op and a device
  copy in GB/s (bytes read plus bytes written): the copy's bandwidth is the
  reference for an elementwise op;
* ``cuda_matmul_8192_f32`` / ``_bf16``: 8192^3 matrix products in TFLOP/s (PyTorch with
  TF32 off, as ember's float32 is true float32);
* ``cuda_softmax_8192x8192`` / ``cuda_layer_norm_8192x8192``: row kernels over
  (8192, 8192) float32;
* ``cuda_training_mlp_adam_b128`` / ``cuda_training_cnn_adam_b64``: the training steps of
  ``bench_training.py`` (same models, weights and batches) moved to the GPU;
* ``cuda_amp_mlp_f16_train_step_b128``: ``bench_amp.py``'s autocast step with GradScaler, float16;
* ``cuda_training_transformer_adamw``: a training step of
  ``nn.TransformerEncoderLayer(768, 12, 3072)`` (dropout 0.1, as default) on a batch of
  32 sequences of 512, AdamW;
* ``cuda_bf16_<op>``: one op on a (32, 512, 768) bfloat16 activation (a transformer layer's at batch 32):
  ``add``, ``mul`` by a number, ``tanh``, ``gelu``, ``dropout`` (training, p = 0.1), ``layer_norm``,
  ``softmax``, and the float32 -> bfloat16 cast (issues 22 and 24: bfloat16 steps);
* ``cuda_training_gpt_2layer`` / ``cuda_training_gpt_6layer``: a training step of ``gpt_model.py``'s GPT
  (issue 24: forward, backward, ``clip_grad_norm_(1.0)``, fused AdamW, ``zero_grad(set_to_none=True)``);
  ``gpt_phases.py`` times its phases.

Each setup checks once, before timing, that ember computes what PyTorch computes
(the sum, the softmax, the losses of the first steps), so a fast wrong kernel cannot
hide in the table.
"""

from __future__ import annotations

import operator

import gpt_model
import numpy as np
from harness import NotRun, Skip, Workload, import_torch

_LARGE = 1 << 28  # elements of the large pointwise rows (1 GiB of float32 per tensor)
_SMALL = 16
_LAUNCHES = 100  # calls per timed callable of the launch-overhead row
_ROWS = 8192  # softmax / layer_norm over (_ROWS, _ROWS), matmul _ROWS^3


# --------------------------------------------------------------------------- plumbing


def _ember_cuda():
    """``ember`` with its cuda backend ready, or :class:`Skip` when this machine has no usable GPU."""
    import ember
    import ember.cuda
    import ember.nn
    import ember.optim  # noqa: F401  (a subpackage: the training rows use ``lib.optim``)

    if not ember.cuda.is_available():
        from ember.cuda._runtime import unavailable_reason

        raise Skip(unavailable_reason() or "ember.cuda.is_available() is False")
    ember.cuda.init()
    return ember


def _torch_cuda():
    """``torch`` when it is importable and sees a GPU, else None (the PyTorch column stays empty)."""
    torch = import_torch()
    if torch is None or not torch.cuda.is_available():
        return None
    return torch


def _synced(fn, sync, repeat=1):
    """A callable running ``fn`` ``repeat`` times, then waiting for the device (GPU time = wall time)."""
    if repeat == 1:

        def call():
            fn()
            sync()

        return call

    def call_many():
        for _ in range(repeat):
            fn()
        sync()

    return call_many


def _host(rng, *shape):
    return rng.standard_normal(shape, dtype=np.float32)


def _to_ember(ember, array):
    return ember.from_numpy(array).to("cuda")


def _to_torch(torch, array):
    return torch.from_numpy(array).to("cuda")


def _assert_close(ours, theirs, what, rtol=1e-5, atol=1e-6):
    """ember's and torch's GPU results (tensors or floats) agree, read back on the host."""
    if hasattr(ours, "cpu"):
        ours = ours.detach().cpu().numpy()
    if hasattr(theirs, "cpu"):
        theirs = theirs.detach().cpu().numpy()
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=rtol, atol=atol, err_msg=what)


# --------------------------------------------------------------------------- pointwise and copies


def _setup_add_launch():
    ember = _ember_cuda()
    torch = _torch_cuda()
    rng = np.random.default_rng(0)
    a_np, b_np = _host(rng, _SMALL), _host(rng, _SMALL)
    a, b = _to_ember(ember, a_np), _to_ember(ember, b_np)
    np.testing.assert_array_equal((a + b).cpu().numpy(), a_np + b_np)
    ember_fn = _synced(lambda: operator.add(a, b), ember.cuda.synchronize, _LAUNCHES)
    torch_fn = None
    if torch is not None:
        ta, tb = _to_torch(torch, a_np), _to_torch(torch, b_np)
        torch_fn = _synced(lambda: operator.add(ta, tb), torch.cuda.synchronize, _LAUNCHES)
    return ember_fn, torch_fn


def _setup_add_large():
    ember = _ember_cuda()
    torch = _torch_cuda()
    a = ember.full((_LARGE,), 1.25, device="cuda")
    b = ember.full((_LARGE,), 2.5, device="cuda")
    c = a + b
    if not bool((c == 3.75).all()):
        raise AssertionError("ember's large add is wrong")
    del c
    ember_fn = _synced(lambda: a + b, ember.cuda.synchronize)
    torch_fn = None
    if torch is not None:
        ta = torch.full((_LARGE,), 1.25, device="cuda")
        tb = torch.full((_LARGE,), 2.5, device="cuda")
        torch_fn = _synced(lambda: ta + tb, torch.cuda.synchronize)
    return ember_fn, torch_fn


def _setup_clone_large():
    ember = _ember_cuda()
    torch = _torch_cuda()
    a = ember.full((_LARGE,), 1.25, device="cuda")
    if not bool((a.clone() == a).all()):
        raise AssertionError("ember's large clone is wrong")
    ember_fn = _synced(lambda: a.clone(), ember.cuda.synchronize)
    torch_fn = None
    if torch is not None:
        ta = torch.full((_LARGE,), 1.25, device="cuda")
        torch_fn = _synced(lambda: ta.clone(), torch.cuda.synchronize)
    return ember_fn, torch_fn


# --------------------------------------------------------------------------- bfloat16 activations

_ACTIVATION = (32, 512, 768)
#: bytes read plus written per element (two bfloat16 operands, or a float32 one, in; one bfloat16 out); others: 4
_BF16_BYTES = {"add": 6, "cast": 6}


def _bf16_op(lib, name):
    """``fn(x, y)`` of bf16 row ``name`` for library ``lib`` (ember or torch: the same spelling)."""
    F = lib.nn.functional
    weight = bias = None

    def layer_norm(x, y):
        return F.layer_norm(x, (x.shape[-1],), weight, bias)

    table = {
        "add": lambda x, y: x + y,
        "mul": lambda x, y: x * 0.5,
        "tanh": lambda x, y: lib.tanh(x),
        "gelu": lambda x, y: F.gelu(x),
        "dropout": lambda x, y: F.dropout(x, 0.1, training=True),
        "layer_norm": layer_norm,
        "softmax": lambda x, y: F.softmax(x, dim=-1),
        "cast": lambda x, y: y.to(lib.bfloat16),  # y: the float32 operand
    }
    return table[name]


def _setup_bf16(name):
    def setup():
        ember = _ember_cuda()
        torch = _torch_cuda()
        rng = np.random.default_rng(0)
        x_np, y_np = _host(rng, *_ACTIVATION), _host(rng, *_ACTIVATION)
        x, y = _to_ember(ember, x_np).to(ember.bfloat16), _to_ember(ember, y_np)
        if name != "cast":
            y = y.to(ember.bfloat16)
        fn = _bf16_op(ember, name)
        ours = fn(x, y)
        if ours.dtype != ember.bfloat16 or tuple(ours.shape) != _ACTIVATION:
            raise AssertionError(f"bf16 {name}: {ours.dtype} {tuple(ours.shape)}")
        torch_fn = None
        if torch is not None:
            tx, ty = _to_torch(torch, x_np).to(torch.bfloat16), _to_torch(torch, y_np)
            if name != "cast":
                ty = ty.to(torch.bfloat16)
            tfn = _bf16_op(torch, name)
            if name == "dropout":  # random masks differ: the kept fraction and the scale of the kept values
                kept = ours.float() != 0
                fraction = float(kept.float().mean().item())
                if abs(fraction - 0.9) > 0.01:
                    raise AssertionError(f"bf16 dropout keeps {fraction:.4f} of the values")
                _assert_close(ours.float()[kept], (x.float() / 0.9)[kept], name, rtol=1e-2, atol=1e-2)
            else:
                _assert_close(ours.float(), tfn(tx, ty).float(), f"bf16 {name}", rtol=1.6e-2, atol=1e-2)
            torch_fn = _synced(lambda: tfn(tx, ty), torch.cuda.synchronize)
        return _synced(lambda: fn(x, y), ember.cuda.synchronize), torch_fn

    return setup


# --------------------------------------------------------------------------- matmul


def _setup_matmul(dtype_name):
    def setup():
        ember = _ember_cuda()
        torch = _torch_cuda()
        rng = np.random.default_rng(0)
        a_np, b_np = _host(rng, _ROWS, _ROWS), _host(rng, _ROWS, _ROWS)
        ember_fn = NotRun(f"ember: no {dtype_name} matmul on cuda")
        try:
            a = _to_ember(ember, a_np).to(getattr(ember, dtype_name))
            b = _to_ember(ember, b_np).to(getattr(ember, dtype_name))
        except (TypeError, NotImplementedError, RuntimeError) as exc:
            ember_fn = NotRun(f"ember: {type(exc).__name__}: {exc}")
            a = b = None
        torch_fn = None
        if torch is not None:
            torch.backends.cuda.matmul.allow_tf32 = False  # float32 means float32 on both sides
            ta = _to_torch(torch, a_np).to(getattr(torch, dtype_name))
            tb = _to_torch(torch, b_np).to(getattr(torch, dtype_name))
            torch_fn = _synced(lambda: ta @ tb, torch.cuda.synchronize)
        if a is not None:
            c = a @ b
            if torch is not None:  # a corner of the product (the whole would be 256 MiB each way)
                tol = 2e-2 if dtype_name == "bfloat16" else 1e-3
                _assert_close(c[:64, :64].float(), (ta @ tb)[:64, :64].float(), f"{dtype_name} matmul", tol, tol)
            del c
            ember_fn = _synced(lambda: a @ b, ember.cuda.synchronize)
        return ember_fn, torch_fn

    return setup


# --------------------------------------------------------------------------- row kernels


def _setup_rows(kind):
    def setup():
        ember = _ember_cuda()
        torch = _torch_cuda()
        rng = np.random.default_rng(0)
        x_np = _host(rng, _ROWS, _ROWS)
        x = _to_ember(ember, x_np)
        w = ember.ones(_ROWS, device="cuda")
        bias = ember.zeros(_ROWS, device="cuda")
        if kind == "softmax":

            def ours():
                return ember.softmax(x, -1)
        else:

            def ours():
                return ember.nn.functional.layer_norm(x, (_ROWS,), w, bias)

        torch_fn = None
        if torch is not None:
            tx = _to_torch(torch, x_np)
            tw, tb = torch.ones(_ROWS, device="cuda"), torch.zeros(_ROWS, device="cuda")
            if kind == "softmax":

                def theirs():
                    return torch.softmax(tx, -1)
            else:

                def theirs():
                    return torch.nn.functional.layer_norm(tx, (_ROWS,), tw, tb)

            _assert_close(ours()[:32], theirs()[:32], kind, rtol=1e-4, atol=1e-5)
            torch_fn = _synced(theirs, torch.cuda.synchronize)
        return _synced(ours, ember.cuda.synchronize), torch_fn

    return setup


# --------------------------------------------------------------------------- training steps


def _sequential_step(lib, spec, arrays, sync):
    """``bench_training``'s model and Adam step for ``lib``, on the GPU; the step ends with ``sync()``."""
    model = lib.nn.Sequential(*spec.layers(lib.nn)).to("cuda")
    params = list(model.parameters())
    with lib.no_grad():
        for p, w in zip(params, arrays["weights"], strict=True):
            p.copy_(lib.from_numpy(w.copy()).to("cuda"))
    optimizer = lib.optim.Adam(params, lr=1e-3)
    loss_fn = lib.nn.CrossEntropyLoss()
    x = lib.from_numpy(arrays["x"].copy()).to("cuda")
    target = lib.from_numpy(arrays["target"].copy()).to("cuda")

    def step():
        optimizer.zero_grad()
        loss = loss_fn(model(x), target)
        loss.backward()
        optimizer.step()
        sync()
        return loss

    return step


def _setup_training(spec_name):
    def setup():
        ember = _ember_cuda()
        torch = _torch_cuda()
        import bench_training

        spec = getattr(bench_training, spec_name)
        shapes = [tuple(p.shape) for p in ember.nn.Sequential(*spec.layers(ember.nn)).parameters()]
        arrays = spec.arrays(np.random.default_rng(0), shapes)
        ember_step = _sequential_step(ember, spec, arrays, ember.cuda.synchronize)
        torch_step = None
        if torch is not None:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch_step = _sequential_step(torch, spec, arrays, torch.cuda.synchronize)
            for i in range(2):  # same losses, the second after one Adam update
                _assert_close(ember_step().item(), torch_step().item(), f"loss of step {i + 1}", 2e-3, 2e-4)
        return ember_step, torch_step

    return setup


_D_MODEL, _NHEAD, _FFN, _BATCH, _SEQ = 768, 12, 3072, 32, 512


def _transformer_step(lib, layer, x, sync):
    optimizer = lib.optim.AdamW(layer.parameters(), lr=1e-4)

    def step():
        optimizer.zero_grad()
        out = layer(x)
        loss = (out * out).mean()
        loss.backward()
        optimizer.step()
        sync()
        return loss

    return step


def _setup_transformer():
    ember = _ember_cuda()
    torch = _torch_cuda()
    rng = np.random.default_rng(0)
    x_np = _host(rng, _BATCH, _SEQ, _D_MODEL)
    layer = ember.nn.TransformerEncoderLayer(_D_MODEL, _NHEAD, dim_feedforward=_FFN, batch_first=True).to("cuda")
    x = _to_ember(ember, x_np)
    torch_step = None
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch_layer = torch.nn.TransformerEncoderLayer(
            _D_MODEL, _NHEAD, dim_feedforward=_FFN, batch_first=True
        ).to("cuda")
        with torch.no_grad(), ember.no_grad():  # the same weights on both sides
            theirs = dict(torch_layer.named_parameters())
            for name, p in layer.named_parameters():
                p.copy_(ember.from_numpy(theirs[name].detach().cpu().numpy()).to("cuda"))
        tx = _to_torch(torch, x_np)
        # Dropout draws differ between the libraries: compare one forward without it.
        layer.eval()
        torch_layer.eval()
        with torch.no_grad(), ember.no_grad():
            _assert_close(layer(x)[:1], torch_layer(tx)[:1], "encoder layer forward (eval)", 1e-3, 1e-4)
        torch_layer.train()
        torch_step = _transformer_step(torch, torch_layer, tx, torch.cuda.synchronize)
    layer.train()
    return _transformer_step(ember, layer, x, ember.cuda.synchronize), torch_step


def _gpt_pair(config, ember, torch):
    """The GPT of ``gpt_model.py`` in ember (and PyTorch, with its weights copied over) on the GPU, its AdamW
    (fused) and a batch on each side: ``((model, optimizer, x, y) for ember, the same for torch or None)``."""
    x_np, y_np = gpt_model.batch(config)
    ember.manual_seed(0)
    model = gpt_model.build_gpt(ember, config).to("cuda")
    ours = (model, gpt_model.make_optimizer(ember, model, fused=True), _to_ember(ember, x_np), _to_ember(ember, y_np))
    if torch is None:
        return ours, None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    torch_model = gpt_model.build_gpt(torch, config).to("cuda")
    gpt_model.copy_parameters(torch_model, model, ember, lambda a: _to_ember(ember, a))
    theirs = (torch_model, gpt_model.make_optimizer(torch, torch_model, fused=True), _to_torch(torch, x_np),
              _to_torch(torch, y_np))
    return ours, theirs


def _setup_gpt(config):
    def setup():
        ember = _ember_cuda()
        torch = _torch_cuda()
        ours, theirs = _gpt_pair(config, ember, torch)

        def step_fn(lib, parts):
            return _synced(lambda: gpt_model.train_step(lib, *parts), lib.cuda.synchronize)

        if theirs is not None:  # the first two steps' losses agree (the same weights and batch)
            for i in range(2):
                loss = gpt_model.train_step(ember, *ours)
                torch_loss = gpt_model.train_step(torch, *theirs)
                _assert_close(loss, torch_loss, f"GPT loss at step {i}", 1e-4, 1e-5)
        return step_fn(ember, ours), None if theirs is None else step_fn(torch, theirs)

    return setup


def _setup_amp_mlp():
    """bench_amp's autocast MLP step with GradScaler, on the GPU in float16 (autocast's cuda default)."""
    _ember_cuda()
    from bench_amp import amp_step_pair

    return amp_step_pair("cuda", _torch_cuda(), sync=lambda lib: lib.cuda.synchronize())


# --------------------------------------------------------------------------- the rows

_GPU = {"device": "cuda", "threads": 1}

WORKLOADS = [
    Workload(
        "cuda_add_16elem_launch",
        _setup_add_launch,
        inner=_LAUNCHES,
        description=f"a + b on {_SMALL}-element float32 tensors: {_LAUNCHES} calls, one synchronisation, time per call",
        **_GPU,
    ),
    Workload(
        "cuda_add_2^28_f32",
        _setup_add_large,
        work=3 * 4 * _LARGE,
        unit="GB/s",
        description="a + b on two 2^28-element float32 tensors (3 GiB read and written per call)",
        **_GPU,
    ),
    Workload(
        "cuda_clone_2^28_f32",
        _setup_clone_large,
        work=2 * 4 * _LARGE,
        unit="GB/s",
        description="clone of a 2^28-element float32 tensor: the device copy bandwidth, a reference for pointwise ops",
        **_GPU,
    ),
    Workload(
        "cuda_matmul_8192_f32",
        _setup_matmul("float32"),
        work=2 * _ROWS**3,
        unit="TFLOP/s",
        description="(8192, 8192) @ (8192, 8192) float32 (PyTorch with TF32 off)",
        **_GPU,
    ),
    Workload(
        "cuda_matmul_8192_bf16",
        _setup_matmul("bfloat16"),
        work=2 * _ROWS**3,
        unit="TFLOP/s",
        description="(8192, 8192) @ (8192, 8192) bfloat16",
        **_GPU,
    ),
    Workload(
        "cuda_softmax_8192x8192",
        _setup_rows("softmax"),
        work=2 * 4 * _ROWS * _ROWS,
        unit="GB/s",
        description="softmax over the last dim of a (8192, 8192) float32 tensor",
        **_GPU,
    ),
    Workload(
        "cuda_layer_norm_8192x8192",
        _setup_rows("layer_norm"),
        work=2 * 4 * _ROWS * _ROWS,
        unit="GB/s",
        description="layer_norm over the last dim of a (8192, 8192) float32 tensor, with weight and bias",
        **_GPU,
    ),
    *[
        Workload(
            f"cuda_bf16_{name}",
            _setup_bf16(name),
            work=_BF16_BYTES.get(name, 4) * int(np.prod(_ACTIVATION)),
            unit="GB/s",
            description=f"{name} on a {_ACTIVATION} bfloat16 tensor" + (" (from float32)" if name == "cast" else ""),
            **_GPU,
        )
        for name in ("add", "mul", "tanh", "gelu", "dropout", "layer_norm", "softmax", "cast")
    ],
    Workload(
        "cuda_amp_mlp_f16_train_step_b128",
        _setup_amp_mlp,
        description="bench_amp's autocast SGD step with GradScaler (MLP 784-512-512-10, batch 128), float16 on the GPU",
        **_GPU,
    ),
    Workload(
        "cuda_training_mlp_adam_b128",
        _setup_training("_MLP"),
        description="bench_training's MLP 784-512-512-10 Adam step (batch 128) on the GPU",
        **_GPU,
    ),
    Workload(
        "cuda_training_cnn_adam_b64",
        _setup_training("_CNN"),
        description="bench_training's small CNN Adam step (batch 64 of 1x8x8) on the GPU",
        **_GPU,
    ),
    Workload(
        "cuda_training_transformer_adamw",
        _setup_transformer,
        description=(
            f"TransformerEncoderLayer(d_model={_D_MODEL}, nhead={_NHEAD}, dim_feedforward={_FFN}, dropout 0.1, "
            f"batch_first) training step, batch {_BATCH} x sequence {_SEQ}, loss mean(out^2), AdamW"
        ),
        **_GPU,
    ),
    Workload(
        "cuda_training_gpt_2layer",
        _setup_gpt(gpt_model.TINY),
        description=(
            "gpt_model.py's GPT (2 layers, 2 heads, 32 wide, sequence 16, batch 3, vocabulary 65) training step: "
            "forward, backward, clip_grad_norm_(1.0), fused AdamW, zero_grad(set_to_none=True); PyTorch TF32 off"
        ),
        **_GPU,
    ),
    Workload(
        "cuda_training_gpt_6layer",
        _setup_gpt(gpt_model.SMALL),
        description=(
            "gpt_model.py's GPT (6 layers, 6 heads, 384 wide, sequence 256, batch 12, vocabulary 65; 10.7M "
            "parameters) training step, as the 2-layer row"
        ),
        **_GPU,
    ),
]


# --------------------------------------------------------------------------- FFT (issue 20)


def _fft_case(lib, kind, x):
    """The transform of row ``kind`` on ``x``, in ``lib`` (ember or torch): the workloads of bench_fft.py."""
    if kind == "fft":
        return lib.fft.fft(x)
    if kind == "fft2":
        return lib.fft.fft2(x)
    if kind == "rfft":
        return lib.fft.rfft(x)
    window = lib.hann_window(400, device="cuda")
    return lib.stft(x, 400, 160, window=window, return_complex=True)


_FFT_INPUTS = {"fft": ((64, 4096), True), "fft2": ((512, 512), True), "rfft": ((1 << 20,), False),
               "stft": ((16000,), False)}


def _setup_fft(kind, backward):
    def setup():
        ember = _ember_cuda()
        torch = _torch_cuda()
        rng = np.random.default_rng(0)
        shape, complex_ = _FFT_INPUTS[kind]
        x_np = rng.standard_normal(shape).astype(np.float32)
        if complex_:
            x_np = (x_np + 1j * rng.standard_normal(shape)).astype(np.complex64)

        def make(lib, to_device, sync):
            x = to_device(lib, x_np)
            if not backward:
                return _synced(lambda: _fft_case(lib, kind, x), sync)
            x.requires_grad_(True)
            y = _fft_case(lib, kind, x)
            g = to_device(lib, (np.ones(tuple(y.shape)) * (1 + 0.5j)).astype(np.complex64))
            return _synced(lambda: lib.autograd.grad(_fft_case(lib, kind, x), x, g), sync)

        ember_fn = make(ember, _to_ember, ember.cuda.synchronize)
        torch_fn = None
        if torch is not None:
            torch_fn = make(torch, _to_torch, torch.cuda.synchronize)
            xe, xt = _to_ember(ember, x_np), _to_torch(torch, x_np)
            ours, theirs = _fft_case(ember, kind, xe), _fft_case(torch, kind, xt)
            scale = float(theirs.abs().max())
            _assert_close(ours, theirs, f"cuda {kind}", rtol=1e-3, atol=1e-4 * scale)
        return ember_fn, torch_fn

    return setup


for _kind, _what in (("fft", "ember.fft.fft over the last dim of 64x4096 complex64"),
                     ("fft2", "ember.fft.fft2 of a 512x512 complex64 image"),
                     ("rfft", "ember.fft.rfft of 2^20 float32 samples"),
                     ("stft", "ember.stft of 16000 float32 samples, n_fft 400, hop 160, Hann window")):
    WORKLOADS.append(Workload(f"cuda_{_kind}", _setup_fft(_kind, False), description=f"{_what} (cuFFT)", **_GPU))
    WORKLOADS.append(Workload(f"cuda_{_kind}_fwd_bwd", _setup_fft(_kind, True),
                              description=f"{_what}, then the input's gradient (autograd.grad)", **_GPU))
