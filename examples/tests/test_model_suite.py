"""The ember.compile model suite (benchmarks/models): every model matches its PyTorch twin and its compiled self.

For each registered model: one forward in Ember and in PyTorch with the weights copied over gives the same
outputs (PyTorch is the oracle), and ``ember.compile(model, backend="eager")`` gives eager's outputs. Models
the runner lists as expected failures are strict xfails, so a fix shows up here.
"""

from __future__ import annotations

import importlib
import inspect
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import ember

MODELS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "models"
if str(MODELS_DIR) not in sys.path:
    sys.path.insert(0, str(MODELS_DIR))

registry = importlib.import_module("registry")
runner = importlib.import_module("run")
SPECS = registry.load_all()


def _params(with_xfail):
    params = []
    for name in SPECS:
        marks = []
        if with_xfail and name in runner.EXPECTED_FAILURES:
            marks.append(pytest.mark.xfail(strict=True, reason=f"repro {runner.EXPECTED_FAILURES[name]}"))
        params.append(pytest.param(name, marks=marks, id=name))
    return params


def _build(lib, spec):
    lib.manual_seed(0)
    model = spec.build(lib, **spec.cpu_scale)
    model.eval()
    return model


def _inputs(lib, spec):
    return spec.inputs(lib, np.random.default_rng(0), "cpu", **spec.cpu_scale)


def _forward(lib, model, inputs, seed):
    lib.manual_seed(seed)
    with lib.no_grad():
        return [runner._numpy(t) for t in runner._tensors(model(*inputs))]


def _close(actual, expected, rtol, atol):
    return actual.shape == expected.shape and np.allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)


@pytest.fixture(autouse=True)
def _few_threads():
    previous = ember.get_num_threads()
    ember.set_num_threads(1)  # the models are small: a second thread only fights the other tests
    yield
    ember.set_num_threads(previous)


@pytest.mark.parity
@pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")  # torch's, on the GCN's adjacency
@pytest.mark.parametrize("name", _params(with_xfail=False))
def test_forward_matches_torch(name):
    torch = pytest.importorskip("torch")
    spec = SPECS[name]
    ours, theirs = _build(ember, spec), _build(torch, spec)
    registry.copy_weights(ours, theirs)
    ember_inputs, torch_inputs = _inputs(ember, spec), _inputs(torch, spec)
    expected = _forward(torch, theirs, torch_inputs, seed=1)
    actual = _forward(ember, ours, ember_inputs, seed=1)
    # outputs that change with the seed (samples) cannot match another library's generator: leave them out
    reseeded = _forward(ember, ours, ember_inputs, seed=2)
    assert len(actual) == len(expected) > 0
    compared = 0
    for i, (a, e, r) in enumerate(zip(actual, expected, reseeded)):
        if a.shape != r.shape or not np.array_equal(a, r, equal_nan=True):
            continue
        scale = max(1.0, float(np.nanmax(np.abs(e))) if e.size else 1.0)
        assert _close(a, e, rtol=1e-4, atol=1e-4 * scale), f"{name}: output {i} differs from torch's"
        compared += 1
    assert compared > 0, f"{name}: every output is random; nothing to compare with torch"


@pytest.mark.parametrize("name", _params(with_xfail=True))
def test_compiled_forward_matches_eager(name):
    spec = SPECS[name]
    model, inputs = _build(ember, spec), _inputs(ember, spec)
    expected = _forward(ember, model, inputs, seed=1)
    ember._dynamo.reset()
    try:
        actual = _forward(ember, ember.compile(model, backend="eager"), inputs, seed=1)
    finally:
        ember._dynamo.reset()
    assert len(actual) == len(expected) > 0
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert _close(a, e, rtol=1e-5, atol=1e-6), f"{name}: compiled output {i} differs from eager"


def _wrong_backend(factor, gradient_only=False):
    """A compile backend that runs the captured graph and scales its first output by ``factor``: its value and
    gradient (``gradient_only=False``) or only the gradient that flows back through it (the forward value
    unchanged)."""

    def backend(gm, example_inputs):
        def run(*args):
            outputs = list(gm(*args))
            first = outputs[0]
            if gradient_only:
                outputs[0] = first + (first - first.detach()) * (factor - 1.0)
            else:
                outputs[0] = first * factor
            return tuple(outputs)

        return run

    return backend


def _training_check(name, backend):
    spec = SPECS[name]
    side = runner.Side(ember, spec, runner._build(ember, spec, "cpu"), "cpu", "training")
    row = runner.Row(name, spec.domain)
    runner._check(row, ember, spec, "cpu", "training", side, backend, False)
    ember._dynamo.reset()
    return row


@pytest.mark.parametrize("name", ["mlp", "resnet18"])
def test_training_check_passes_a_correct_backend(name):
    row = _training_check(name, _wrong_backend(1.0))
    assert row.status == "ok", row.mismatch
    assert row.max_diff <= runner.ATOL and row.grad_error <= runner.GRAD_RTOL and row.drift <= runner.DRIFT_RTOL


@pytest.mark.parametrize("name", ["mlp", "resnet18"])
def test_training_check_catches_a_scaled_output(name):
    row = _training_check(name, _wrong_backend(1.01))
    assert row.status == "mismatch"
    assert "step-1" in row.mismatch


def test_training_check_catches_a_wrong_gradient_with_a_right_loss():
    row = _training_check("mlp", _wrong_backend(1.01, gradient_only=True))
    assert row.status == "mismatch"
    assert row.max_diff <= runner.ATOL  # the loss is right: only the gradient check can see it
    assert "step-1 gradient of" in row.mismatch and row.grad_error > runner.GRAD_RTOL


def _run(losses, grads):
    return list(losses), {name: np.asarray(g, dtype=np.float32) for name, g in grads.items()}


def test_compare_training_tolerances():
    grads = {"w": [3.0, 4.0], "b": [1e-7, -1e-7]}  # ||w|| = 5: the floor is 0.05
    eager = _run([2.0, 1.5, 1.0], grads)
    within = 0.8 * runner.DRIFT_RTOL
    ok = runner.compare_training(eager, _run([2.0, 1.5 + within * 2.0, 1.0], {"w": [3.0, 4.004], "b": [1e-6, 1e-6]}))
    assert ok["ok"], ok["mismatch"]
    assert ok["drift"] == pytest.approx(within)
    # 4e-3 off a norm of 5 is 8e-4 relative: within GRAD_RTOL; 1e-2 is not
    bad_grad = runner.compare_training(eager, _run([2.0, 1.5, 1.0], {"w": [3.0, 4.01], "b": [0.0, 0.0]}))
    assert not bad_grad["ok"] and "gradient of w" in bad_grad["mismatch"]
    # a gradient that rounding moves a lot (the perturbed twin's) gets that much more room
    noisy = runner.compare_training(eager, _run([2.0, 1.5, 1.0], {"w": [3.0, 4.01], "b": [0.0, 0.0]}),
                                    noise={"w": np.array([3.0, 4.003], dtype=np.float32)})
    assert noisy["ok"], noisy["mismatch"]
    drifted = runner.compare_training(eager, _run([2.0, 1.5, 1.0 + 1.2 * runner.DRIFT_RTOL * 2.0], grads))
    assert not drifted["ok"] and "later losses" in drifted["mismatch"]
    nan = runner.compare_training(eager, _run([2.0, float("nan"), 1.0], grads))
    assert not nan["ok"] and nan["drift"] == math.inf
    nan_grad = runner.compare_training(eager, _run([2.0, 1.5, 1.0], {"w": [3.0, float("nan")], "b": [0.0, 0.0]}))
    assert not nan_grad["ok"] and "gradient of w" in nan_grad["mismatch"]
    missing = runner.compare_training(eager, _run([2.0, 1.5, 1.0], {"w": [3.0, 4.0]}))
    assert not missing["ok"] and "only on one side" in missing["mismatch"]


def _named_parameters(fn):
    return {name for name, p in inspect.signature(fn).parameters.items() if p.kind is not p.VAR_KEYWORD}


@pytest.mark.parametrize("name", list(SPECS))
def test_cuda_sizes_name_real_keywords(name):
    # build and inputs swallow each other's keywords (**_), so a misspelt size would be ignored silently
    spec = SPECS[name]
    assert spec.cuda_scale, f"{name} has no GPU sizes"
    known = _named_parameters(spec.build) | _named_parameters(spec.inputs)
    assert set(spec.cuda_scale) <= known, f"{name}: {sorted(set(spec.cuda_scale) - known)} are not size keywords"
    assert set(spec.cpu_scale) <= known


def test_sizes_pick_the_scale():
    spec = SPECS["actor_critic"]
    assert registry.sizes(spec, "cuda") == spec.cuda_scale and registry.sizes(spec, "cpu") == spec.cpu_scale
    assert registry.sizes(spec, "cuda") is not spec.cuda_scale  # a copy: callers may change it
    with pytest.raises(ValueError, match="scale must be one of"):
        registry.sizes(spec, "tpu")


def test_scale_follows_the_device_unless_given():
    assert runner.parse_args([]).scale == "cpu"
    assert runner.parse_args(["--device", "cuda"]).scale == "cuda"
    assert runner.parse_args(["--device", "cpu", "--scale", "cuda"]).scale == "cuda"


def test_cuda_sizes_on_the_cpu():
    # the runner's sides and builds at the GPU sizes, on the CPU (what --device cpu --scale cuda runs)
    spec = SPECS["actor_critic"]
    model = runner._build(ember, spec, "cpu", "cuda")
    side = runner.Side(ember, spec, model, "cpu", "training", scale="cuda")
    assert tuple(side.inputs[0].shape) == (spec.cuda_scale["batch"], 8)
    assert tuple(runner.Side(ember, spec, model, "cpu", "training").inputs[0].shape) == (256, 8)
    args = runner.parse_args(["--backend", "eager", "--repeats", "1", "--no-torch", "--scale", "cuda"])
    row = runner.run_model(spec, args, ember, None)
    assert row.status == "ok", row.error or row.mismatch
    args.threads, args.load = 1, (0.0, 0.0, 0.0)
    text = runner.render([row], args, {spec.name: spec}, elapsed=1.0)
    assert "Sizes here (cuda): batch=4096." in text
    assert text.startswith("## CPU, training (CUDA sizes)")  # a dry run does not replace the CPU section


def test_register_refuses_duplicates_and_other_types():
    spec = next(iter(SPECS.values()))
    with pytest.raises(ValueError, match="already registered"):
        registry.register(spec)
    with pytest.raises(TypeError, match="ModelSpec"):
        registry.register("resnet18")


def test_copy_weights_names_the_mismatch():
    torch = pytest.importorskip("torch")
    with pytest.raises(KeyError, match="only in ember"):
        registry.copy_weights(ember.nn.Linear(2, 3), torch.nn.Linear(2, 3, bias=False))
    with pytest.raises(ValueError, match="weight"):
        registry.copy_weights(ember.nn.Linear(2, 3), torch.nn.Linear(3, 3))


def test_summary_geomeans_and_pass_rates():
    fast = runner.Row("a", "x", status="ok", fullgraph="pass", breaks=0, compile_s=1.0, torch_compile_s=2.0)
    fast.times = {"ember": 4.0, "ember_compiled": 1.0, "torch": 2.0, "torch_compiled": 1.0}
    slow = runner.Row("b", "x", status="ok", fullgraph="fail", breaks=2, compile_s=3.0, torch_compile_s=2.0,
                      torch_graphs=0)
    slow.times = {"ember": 1.0, "ember_compiled": 1.0, "torch": 8.0, "torch_compiled": 1.0}
    broken = runner.Row("c", "x", status="error (compile)", breaks=1)
    out = runner.summary([fast, slow, broken])
    assert out["pass rate, fullgraph=False"] == "2/3"
    assert out["pass rate, fullgraph=True"] == "1/3"
    assert out["graph breaks (ember, all models)"] == 3
    assert out["fullgraph=True failures where torch.compile captures no graph either"] == "b"
    assert out["geomean speedup compiled/eager, ember (passing models)"] == f"{math.sqrt(4.0 * 1.0):.2f}x"
    assert out["geomean speedup compiled/eager, torch (same models)"] == f"{math.sqrt(2.0 * 8.0):.2f}x"
    assert out["mean compile time (first call), ember / torch"] == "2.00 s / 2.00 s"


def test_write_section_replaces_only_its_own_section(tmp_path):
    path = tmp_path / "BENCHMARKS_MODELS.md"
    runner.write_section(path, "cpu training", "first\n")
    runner.write_section(path, "cpu inference", "other\n")
    runner.write_section(path, "cpu training", "second\n")
    text = path.read_text()
    assert text.startswith("# ember.compile model suite")
    assert "second" in text and "first" not in text and "other" in text
    assert text.count("<!-- begin cpu training -->") == 1


def test_runner_row_for_a_small_model():
    name = "dlrm" if "dlrm" in SPECS else next(iter(SPECS))
    args = runner.parse_args(["--backend", "eager", "--repeats", "1", "--no-torch", "-k", name])
    row = runner.run_model(SPECS[name], args, ember, None)
    assert row.status == "ok", row.error
    assert row.fullgraph == "pass" and row.graphs == 1 and row.breaks == 0
    assert row.max_diff is not None and row.max_diff < runner.ATOL
    assert row.grad_error is not None and row.grad_error <= runner.GRAD_RTOL
    assert row.times["ember"] > 0 and row.times["ember_compiled"] > 0


def test_render_has_the_summary_the_rows_and_the_reasons():
    row = runner.Row("tiny", "x", status="ok", fullgraph="fail", graphs=2, breaks=1, torch_graphs=0, max_diff=0.0)
    row.reasons = ["data-dependent branch (model.py:3)"]
    row.times = {"ember": 0.004, "ember_compiled": 0.002, "torch": 0.003, "torch_compiled": 0.001}
    args = runner.parse_args(["--mode", "inference"])
    args.threads, args.load = 1, (0.5, 0.5, 0.5)
    text = runner.render([row], args, {}, elapsed=60.0)
    # name, domain, status, fullgraph, graphs, breaks (torch's), max diff, compile s, then ms and ratios
    assert text.startswith("## CPU, inference")
    expected_row = (
        "| tiny | x | ok | fail | 2 | 1 (no graph) | 0.0e+00 | - (-) "
        "| 4.00 | 2.00 | 2.00 | 3.00 | 1.00 | 3.00 |"
    )
    assert expected_row in text
    assert "Worst five (compiled Ember / torch.compile time): tiny 2.00x." in text
    assert "  - break: data-dependent branch (model.py:3)" in text
