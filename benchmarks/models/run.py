"""Run the ember.compile model suite: correctness, graph breaks, compile time and speed, next to torch.compile.

Usage::

    python benchmarks/models/run.py --device cpu --mode training [-k NAME ...] [--backend inductor] [--fullgraph]

For each registered model (``registry.load_all()``), in one process:

1. build the Ember model from a fixed seed and a PyTorch twin with the same weights (``copy_weights``);
2. ``ember._dynamo.explain`` the model's forward: graphs, graph breaks and their reasons, and
   ``torch._dynamo.explain``'s counts for the same code;
3. the ``fullgraph=True`` column: capture with ``fullgraph=True`` (backend ``"eager"``: the capture alone)
   and compare with eager Ember;
4. compile the model with ``--backend`` (as ``model.compile()`` does: the loss, backward and optimizer run
   eagerly) and check compiled == eager Ember: the outputs (inference) or the losses of
   5 SGD steps of two identical models (training), to the tolerances printed in the table's legend; the
   first compiled call's time is the compile time (the same for ``torch.compile``);
5. time eager and compiled steps of Ember and of PyTorch, interleaved (each repeat runs the four once), the
   minimum over the repeats, with both libraries' threads pinned to ``ember.get_num_threads()``.

A failure of one model is recorded in its row and the run goes on. The results replace this device and
mode's section of ``BENCHMARKS_MODELS.md`` (other sections are kept), and a plot of the speedups is written
next to it when matplotlib is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import re
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import registry  # noqa: E402

SEED = 0
CHECK_STEPS = 5
#: compiled vs eager Ember: ``|a - b| <= ATOL + RTOL * |b|`` elementwise (inference outputs; the step-1 loss)
RTOL, ATOL = 1e-4, 1e-4
#: training, step 1: each parameter's gradient ``g`` (compiled) against eager's ``e``:
#: ``||g - e|| <= GRAD_RTOL * max(||e||, GRAD_FLOOR * max_p ||e_p||) + GRAD_NOISE * ||n - e||`` (norms over the
#: tensor), ``n`` the gradient of an eager twin whose weights are moved by one float32 ulp (a random sign each,
#: see :data:`PERTURBATION`): how much float32 rounding alone moves that gradient. The floor keeps gradients that
#: are rounding noise (a batch-norm bias followed by another normalisation: ~1e-7 where others are ~1) from
#: failing on their relative error alone; the noise term covers ill-conditioned ones (mobilenet_v2's early
#: batch-norm biases at batch 2 move by 2e-3 relative under a one-ulp change of the weights).
GRAD_RTOL, GRAD_FLOOR, GRAD_NOISE = 1e-3, 1e-2, 4.0
PERTURBATION = 2.0**-23
#: training, steps 2..5: ``|loss - eager's| <= DRIFT_RTOL * |eager's step-1 loss|``. Loose on purpose: five SGD
#: steps of a batch-norm net at batch 2 amplify float32 rounding chaotically (eager float32 against eager
#: float64, against eager with 1e-4 gradient noise or with the weights moved by one ulp, and compiled against
#: eager all drift by 3-10% of the first loss by steps 3-5 on mobilenet_v2, 1-2% on resnet50), so the later
#: steps only catch what rounding cannot do (weights a compiled graph keeps stale: 21% at step 2 and 60% at
#: step 3 on mobilenet_v2, NaNs, a diverging run); step 1 is the precise check.
DRIFT_RTOL = 0.2
LR = 0.01

#: ``--autocast DTYPE``: the forward (and the loss) of every step, eager and compiled, in both libraries, runs
#: in ``lib.autocast(device, dtype=DTYPE)``; None runs float32. Set once by :func:`main`.
AUTOCAST = None
#: The checks' tolerances under autocast: compiled and eager round differently to the 16-bit type (a fused
#: kernel keeps float32 between ops where eager rounds after each), by a few units of its last place
#: (bfloat16: 2^-8 relative), and the one-ulp float32 twin of the gradient check moves no 16-bit rounding.
AUTOCAST_TOLERANCES = {"bfloat16": {"RTOL": 3e-2, "ATOL": 3e-2, "GRAD_RTOL": 3e-2},
                       "float16": {"RTOL": 5e-3, "ATOL": 5e-3, "GRAD_RTOL": 5e-3}}

#: What ember-inductor logs when it cannot compile a graph and runs it eagerly instead.
FALLBACK = "runs this graph eagerly"

#: Models known to fail under ember.compile, with the repro (in /tmp/models_repros/ when written) that shows why.
EXPECTED_FAILURES: dict[str, str] = {}


@dataclass
class Row:
    """One model's results (times in seconds; None where not measured)."""

    name: str
    domain: str
    status: str = "not run"
    fullgraph: str = "-"
    graphs: int | None = None
    breaks: int | None = None
    reasons: list = field(default_factory=list)
    torch_graphs: int | None = None
    torch_breaks: int | None = None
    max_diff: float | None = None  # inference: the outputs; training: the step-1 loss
    grad_error: float | None = None  # training: the worst step-1 gradient's error (see GRAD_RTOL)
    drift: float | None = None  # training: the worst later step's |loss difference| / |eager's step-1 loss|
    mismatch: str = ""  # what the check found different
    compile_s: float | None = None
    torch_compile_s: float | None = None
    times: dict = field(default_factory=dict)  # "ember", "ember_compiled", "torch", "torch_compiled"
    error: str = ""
    fullgraph_error: str = ""
    warnings: list = field(default_factory=list)  # what ember's compiler logged (warnings)
    fallback: bool = False  # the backend ran a graph eagerly

    @property
    def passed(self):
        return self.status in ("ok", "ok, eager fallback")


# ----------------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------------


def _tensors(output):
    """The tensors of a model's output, in a fixed order (a tensor, or nested tuples/lists/dicts of them)."""
    if isinstance(output, dict):
        return [t for key in sorted(output) for t in _tensors(output[key])]
    if isinstance(output, (tuple, list)):
        return [t for item in output for t in _tensors(item)]
    return [output] if hasattr(output, "detach") else []


def _numpy(tensor):
    tensor = tensor.detach()
    if getattr(tensor, "is_sparse", False):
        tensor = tensor.to_dense()
    return np.asarray(tensor.cpu().float().numpy() if tensor.is_floating_point() else tensor.cpu().numpy())


def _compare(expected, actual):
    """``(max abs difference, within tolerance)`` of two lists of tensors or floats."""
    expected, actual = list(expected), list(actual)
    if len(expected) != len(actual):
        return math.inf, False
    worst, ok = 0.0, True
    for e, a in zip(expected, actual):
        e = _numpy(e) if hasattr(e, "detach") else np.asarray(e)
        a = _numpy(a) if hasattr(a, "detach") else np.asarray(a)
        if e.shape != a.shape:
            return math.inf, False
        if e.size:
            diff = np.abs(e.astype(np.float64) - a.astype(np.float64))
            worst = max(worst, float(np.nanmax(diff)) if not np.isnan(diff).all() else 0.0)
            ok = ok and bool(np.allclose(a, e, rtol=RTOL, atol=ATOL, equal_nan=True))
    return worst, ok


def _sync(lib, device):
    if device == "cuda":
        lib.cuda.synchronize()


def _short(text, limit=160):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Side:
    """One library's model, inputs, and the step functions (eager and compiled) of the mode."""

    def __init__(self, lib, spec, model, device, mode, scale=None):
        self.lib, self.spec, self.model, self.device, self.mode = lib, spec, model, device, mode
        self.scale = scale or device  # which sizes: "cpu" (spec.cpu_scale) or "cuda" (spec.cuda_scale)
        self.inputs = spec.inputs(lib, np.random.default_rng(SEED), device, **registry.sizes(spec, self.scale))
        model.train(mode == "training")
        self.optimizer = lib.optim.SGD(model.parameters(), lr=LR, momentum=0.9) if mode == "training" else None

    def forward(self, model):
        """The function a step calls: ``model`` (inference) or ``model`` and the loss (training); ``model`` is
        the eager module or its compiled wrapper (the loss runs eagerly, as after ``model.compile()``). Under
        ``--autocast`` both run in an autocast region (:data:`AUTOCAST`)."""
        spec, lib = self.spec, self.lib
        if AUTOCAST is not None:
            device_type, dtype = self.device, getattr(lib, AUTOCAST)
            if self.mode == "inference":
                def forward_autocast(*inputs):
                    with lib.autocast(device_type, dtype=dtype):
                        return model(*inputs)

                return forward_autocast

            def forward_loss_autocast(*inputs):
                with lib.autocast(device_type, dtype=dtype):
                    return spec.loss(lib, model(*inputs), inputs)

            return forward_loss_autocast
        if self.mode == "inference":
            return model

        def forward_loss(*inputs):
            return spec.loss(lib, model(*inputs), inputs)

        return forward_loss

    def step(self, fn, optimizer=None):
        """One step with ``fn`` (from :meth:`forward`): its output (inference) or its loss after backward and
        the optimizer's step (training)."""
        if self.mode == "inference":
            with self.lib.no_grad():
                return fn(*self.inputs)
        optimizer = optimizer or self.optimizer
        loss = fn(*self.inputs)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss


def _build(lib, spec, device, scale=None):
    """``spec``'s model at the sizes of ``scale`` (default: ``device``'s), from the fixed seed, on the CPU."""
    lib.manual_seed(SEED)
    return spec.build(lib, **registry.sizes(spec, scale or device))


def _explain(row, ember, side):
    ember._dynamo.reset()
    context = ember.no_grad() if side.mode == "inference" else contextlib.nullcontext()
    with context:
        out = ember._dynamo.explain(side.model)(*side.inputs)
    row.graphs, row.breaks = out.graph_count, out.graph_break_count
    seen = []
    for reason in out.break_reasons:
        text = _short(str(reason).splitlines()[0] if str(reason) else repr(reason))
        location = re.search(r"(\S+\.py):(\d+)", str(reason))
        if location:
            text += f" ({Path(location.group(1)).name}:{location.group(2)})"
        if text not in seen:
            seen.append(text)
    row.reasons = seen


def _torch_explain(row, torch, side):
    torch._dynamo.reset()
    context = torch.no_grad() if side.mode == "inference" else contextlib.nullcontext()
    try:
        with context:
            out = torch._dynamo.explain(side.model)(*side.inputs)
        # no graph at all: dynamo skipped the frame (it does for nn.LSTM/GRU) and torch.compile runs it eagerly
        row.torch_graphs = out.graph_count
        row.torch_breaks = out.graph_break_count if out.graph_count else None
    except Exception:  # torch's own failure is only context here
        row.torch_graphs = row.torch_breaks = None
    torch._dynamo.reset()


def _check_fullgraph(ember, spec, side, reference):
    """Capture the forward with ``fullgraph=True`` (backend "eager") and compare one call with ``reference``."""
    ember._dynamo.reset()
    fn = side.forward(ember.compile(side.model, backend="eager", fullgraph=True))
    ember.manual_seed(SEED + 1)
    context = ember.no_grad() if side.mode == "inference" else contextlib.nullcontext()
    with context:
        out = fn(*side.inputs)
    _, ok = _compare(_tensors(reference), _tensors(out))
    ember._dynamo.reset()
    return "pass" if ok else "mismatch"


def _fullgraph_column(row, ember, spec, side):
    ember.manual_seed(SEED + 1)
    with ember.no_grad() if side.mode == "inference" else contextlib.nullcontext():
        reference = side.forward(side.model)(*side.inputs)
    try:
        row.fullgraph = _check_fullgraph(ember, spec, side, reference)
    except Exception as exc:
        row.fullgraph = "fail"
        row.fullgraph_error = _error(exc)


def _train_steps(lib, side, fn, steps, device, row=None):
    """``steps`` training steps of ``side`` with ``fn`` (re-seeded before each, so sampling models draw alike):
    the losses, and each parameter's gradient of step 1 (numpy, by name). With ``row``, the first step's wall
    time is its compile time."""
    losses, grads = [], {}
    for step in range(steps):
        lib.manual_seed(SEED + 1 + step)
        start = time.perf_counter()
        loss = fn(*side.inputs)
        loss.backward()
        if step == 0:
            grads = {name: _numpy(p.grad) for name, p in side.model.named_parameters() if p.grad is not None}
        side.optimizer.step()
        side.optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss))
        _sync(lib, device)
        if step == 0 and row is not None:
            row.compile_s = time.perf_counter() - start
    return losses, grads


def compare_training(expected, actual, noise=None):
    """Compare two training runs, ``(losses, step-1 gradients by name)`` each (eager's first).

    Step 1 is the precise check: the loss to ``ATOL + RTOL |b|`` and every parameter's gradient to
    :data:`GRAD_RTOL` (normwise, plus ``GRAD_NOISE`` times how far ``noise``, the step-1 gradients of eager
    with the weights moved by one ulp, lies from eager's); the later losses to ``DRIFT_RTOL`` of the first
    loss (see :data:`DRIFT_RTOL`: rounding drifts chaotically there).

    Returns:
        dict: ``loss_diff`` (step 1), ``grad_error`` (the worst gradient's error over its tolerance, times
        ``GRAD_RTOL``: passing means ``<= GRAD_RTOL``), ``drift`` (the worst later ``|loss difference| / |first
        loss|``), ``ok`` and ``mismatch`` (what differs, "" when ``ok``).
    """
    (losses, grads), (their_losses, their_grads) = expected, actual
    noise = noise or {}
    problems = []
    if len(losses) != len(their_losses):
        return {"loss_diff": math.inf, "grad_error": None, "drift": None, "ok": False,
                "mismatch": f"{len(their_losses)} losses instead of {len(losses)}"}
    loss_diff = abs(their_losses[0] - losses[0])
    if not loss_diff <= ATOL + RTOL * abs(losses[0]):
        problems.append(f"step-1 loss {their_losses[0]:.6g} vs eager {losses[0]:.6g}")
    if set(grads) != set(their_grads):
        missing = sorted(set(grads) ^ set(their_grads))
        problems.append(f"gradients of {missing[:3]} only on one side")
    norms = {name: float(np.linalg.norm(g.astype(np.float64))) for name, g in grads.items()}
    floor = GRAD_FLOOR * max(norms.values(), default=0.0)
    errors = {}
    for name in sorted(set(grads) & set(their_grads)):
        e, g = grads[name].astype(np.float64), their_grads[name].astype(np.float64)
        if e.shape != g.shape:
            problems.append(f"{name}'s gradient has shape {g.shape}, eager's {e.shape}")
            continue
        tolerance = GRAD_RTOL * max(norms[name], floor)
        if name in noise and noise[name].shape == e.shape:
            tolerance += GRAD_NOISE * float(np.linalg.norm(noise[name].astype(np.float64) - e))
        difference = float(np.linalg.norm(g - e))
        errors[name] = GRAD_RTOL * difference / tolerance if tolerance > 0 else (math.inf if difference else 0.0)
    worst = max(errors, key=lambda n: (math.isnan(errors[n]), errors[n]), default=None)  # a NaN is the worst
    grad_error = errors[worst] if worst is not None else None
    if worst is not None and not grad_error <= GRAD_RTOL:
        problems.append(f"step-1 gradient of {worst} off by {grad_error / GRAD_RTOL:.2g}x its tolerance")
    scale = abs(losses[0]) or 1.0
    drifts = [0.0 if math.isnan(a) and math.isnan(b) else abs(a - b) / scale
              for a, b in zip(their_losses[1:], losses[1:])]
    drift = max((math.inf if math.isnan(d) else d for d in drifts), default=0.0)
    if not drift <= DRIFT_RTOL:
        listed = ", ".join(f"{a:.4g} vs {b:.4g}" for a, b in zip(their_losses, losses))
        problems.append(f"later losses drift by {drift:.1e} of the first (compiled vs eager: {listed})")
    return {"loss_diff": loss_diff, "grad_error": grad_error, "drift": drift, "ok": not problems,
            "mismatch": "; ".join(problems)}


def _perturbed_twin(ember, spec, device, mode, eager):
    """A twin of ``eager``'s model with every weight moved by about one float32 ulp (``1 +- PERTURBATION``, a
    random sign per element): its gradients show how far float32 rounding alone moves eager's."""
    model = _build(ember, spec, device, eager.scale).to(device)
    model.load_state_dict(eager.model.state_dict())
    rng = np.random.default_rng(SEED)
    with ember.no_grad():
        for p in model.parameters():
            if p.is_floating_point():
                signs = rng.choice(np.array([-1.0, 1.0], dtype=np.float32), size=tuple(p.shape))
                p.mul_(ember.from_numpy(1.0 + PERTURBATION * signs).to(device=device, dtype=p.dtype))
    return Side(ember, spec, model, device, mode, eager.scale)


def _check(row, ember, spec, device, mode, eager, backend, fullgraph):
    """Compile a twin of the eager Ember model and compare the two: the outputs (inference), or the losses
    of 5 SGD steps and the step-1 gradients (training, :func:`compare_training`); returns the compiled
    step function's side."""
    from ember._inductor import config as inductor_config

    # the check compares random draws (dropout masks) with eager mode's: ember-inductor keeps eager's draws
    # under fallback_random=True; the timed function below is compiled again with the default (the numbers
    # computed in the kernels, fused with their consumers)
    with inductor_config.patch(fallback_random=True):
        return _check_eager_draws(row, ember, spec, device, mode, eager, backend, fullgraph)


def _check_eager_draws(row, ember, spec, device, mode, eager, backend, fullgraph):
    """:func:`_check`'s comparison (under ``fallback_random=True``), then the compile that is timed."""
    twin = _build(ember, spec, device, eager.scale).to(device)
    twin.load_state_dict(eager.model.state_dict())
    compiled = Side(ember, spec, twin, device, mode, eager.scale)
    perturbed = _perturbed_twin(ember, spec, device, mode, eager) if mode == "training" else None
    ember._dynamo.reset()
    fn = compiled.forward(ember.compile(twin, backend=backend, fullgraph=fullgraph))
    if mode == "inference":
        ember.manual_seed(SEED + 1)
        expected = eager.step(eager.forward(eager.model))
        ember.manual_seed(SEED + 1)
        start = time.perf_counter()
        actual = compiled.step(fn)
        _sync(ember, device)
        row.compile_s = time.perf_counter() - start
        row.max_diff, ok = _compare(_tensors(expected), _tensors(actual))
        if not ok:
            row.mismatch = f"outputs differ by up to {row.max_diff:.2e}"
    else:
        _, noise = _train_steps(ember, perturbed, perturbed.forward(perturbed.model), 1, device)
        expected = _train_steps(ember, eager, eager.forward(eager.model), CHECK_STEPS, device)
        actual = _train_steps(ember, compiled, fn, CHECK_STEPS, device, row)
        verdict = compare_training(expected, actual, noise)
        row.max_diff, row.grad_error, row.drift = verdict["loss_diff"], verdict["grad_error"], verdict["drift"]
        ok, row.mismatch = verdict["ok"], verdict["mismatch"]
    row.status = "ok" if ok else "mismatch"
    ember._dynamo.reset()
    # compiled on its first (warm-up) call, outside the fallback_random patch of _check
    compiled.fn = compiled.forward(ember.compile(twin, backend=backend, fullgraph=fullgraph))
    return compiled


def _time_all(row, variants, repeats, budget_s=0.25):
    """Interleaved timing: each repeat times ``iters`` steps of every variant; the minimum per step is kept."""
    for run, sync in variants.values():  # warm up (and size the loop on the first variant)
        run()
        run()
        sync()
    first_run, first_sync = next(iter(variants.values()))
    start = time.perf_counter()
    first_run()
    first_sync()
    iters = max(1, min(50, int(budget_s / max(time.perf_counter() - start, 1e-6))))
    best = dict.fromkeys(variants, math.inf)
    for _ in range(repeats):
        for name, (run, sync) in variants.items():
            start = time.perf_counter()
            for _ in range(iters):
                run()
            sync()
            best[name] = min(best[name], (time.perf_counter() - start) / iters)
    row.times.update(best)


class _Records(logging.Handler):
    """Collects the warnings that ember's compiler logs (an eager fallback is only a log line)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _ember_warnings(row):
    handler = _Records()
    loggers = [logging.getLogger(name) for name in ("ember._inductor", "ember._dynamo")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
        for message in handler.messages:
            text = _short(message, 220)
            if text not in row.warnings:
                row.warnings.append(text)
        row.fallback = row.fallback or any(FALLBACK in m for m in handler.messages)


def _error(exc):
    return _short(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", 200)


def _torch_variants(row, torch, theirs, args):
    """torch.compile the twin (its first call is the compile time) and return the two timed torch variants."""
    torch._dynamo.reset()
    torch_fn = theirs.forward(torch.compile(theirs.model, backend=args.backend))
    torch_opt = torch.optim.SGD(theirs.model.parameters(), lr=LR, momentum=0.9) if theirs.optimizer else None
    start = time.perf_counter()
    theirs.step(torch_fn, torch_opt)
    _sync(torch, args.device)
    row.torch_compile_s = time.perf_counter() - start
    sync = lambda: _sync(torch, args.device)  # noqa: E731
    return {
        "torch": (lambda: theirs.step(theirs.forward(theirs.model)), sync),
        "torch_compiled": (lambda: theirs.step(torch_fn, torch_opt), sync),
    }


def run_model(spec, args, ember, torch):
    """All the measurements of one model; never raises. A failing phase is recorded in the row (the first
    failure names the status) and the phases that do not depend on it still run: a model that ember cannot
    compile is still timed eagerly and with torch.compile."""
    row = Row(spec.name, spec.domain)
    errors = []

    def attempt(phase, fn, *fn_args):
        try:
            return fn(*fn_args)
        except Exception as exc:
            errors.append((phase, _error(exc)))
            if args.verbose:
                traceback.print_exc()
            return None

    try:
        ours = attempt("build", lambda: Side(ember, spec, _build(ember, spec, args.device, args.scale).to(args.device),
                                             args.device, args.mode, args.scale))
        theirs = None
        if ours is not None and torch is not None:
            def build_theirs():
                torch_model = _build(torch, spec, args.device, args.scale)
                registry.copy_weights(ours.model, torch_model)
                return Side(torch, spec, torch_model.to(args.device), args.device, args.mode, args.scale)

            theirs = attempt("torch build", build_theirs)
        if ours is not None:
            with _ember_warnings(row):
                attempt("explain", _explain, row, ember, ours)
                if not args.fullgraph:
                    attempt("fullgraph", _fullgraph_column, row, ember, spec, ours)
                compiled = attempt("compile", _check, row, ember, spec, args.device, args.mode, ours, args.backend,
                                   args.fullgraph)
            if args.fullgraph:
                row.fullgraph = "pass" if row.passed else "fail"
        if theirs is not None:
            attempt("torch explain", _torch_explain, row, torch, theirs)
        variants = {}
        if ours is not None:
            variants["ember"] = (lambda: ours.step(ours.forward(ours.model)), lambda: _sync(ember, args.device))
            if compiled is not None and row.passed:
                variants["ember_compiled"] = (lambda: compiled.step(compiled.fn), lambda: _sync(ember, args.device))
        if theirs is not None:
            variants.update(attempt("torch.compile", _torch_variants, row, torch, theirs, args) or {})
        if variants:
            attempt("timing", _time_all, row, variants, args.repeats)
    finally:
        ember._dynamo.reset()
        if torch is not None:
            torch._dynamo.reset()
    if errors:
        row.error = "; ".join(f"{phase}: {text}" for phase, text in errors)
        ours_failed = [phase for phase, _ in errors if phase in ("build", "explain", "fullgraph", "compile")]
        if ours_failed and row.status in ("not run", "ok"):
            row.status = f"error ({ours_failed[0]})"
    if row.passed and row.fallback:
        row.status = "ok, eager fallback"
    if not row.passed and spec.name in EXPECTED_FAILURES:
        row.status = f"xfail: {row.status}"
    return row


# ----------------------------------------------------------------------------------------------------------
# report
# ----------------------------------------------------------------------------------------------------------


def _geomean(values):
    values = [v for v in values if v and math.isfinite(v) and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _ratio(row, num, den):
    a, b = row.times.get(num), row.times.get(den)
    return a / b if a and b and math.isfinite(a) and math.isfinite(b) else None


def summary(rows):
    """The summary numbers of a run (a dict of label -> value)."""
    timed = [r for r in rows if r.passed]
    n = len(rows)
    out = {
        "models": n,
        "pass rate, fullgraph=False": f"{sum(r.passed for r in rows)}/{n}",
        "pass rate, fullgraph=True": f"{sum(r.passed and r.fullgraph == 'pass' for r in rows)}/{n}",
        # recurrent layers (allow_rnn off by default in both compilers): torch.compile runs these frames
        # eagerly too, so fullgraph=True fails there as well
        "fullgraph=True failures where torch.compile captures no graph either": ", ".join(
            r.name for r in rows if r.fullgraph != "pass" and r.torch_graphs == 0) or "none",
        "graph breaks (ember, all models)": sum(r.breaks or 0 for r in rows),
        "graph breaks (torch.compile, same models)": sum(r.torch_breaks or 0 for r in rows),
        "models where ember-inductor fell back to eager": sum(r.fallback for r in rows),
        "models torch.compile captures no graph of (runs eagerly)": sum(r.torch_graphs == 0 for r in rows),
    }
    speed = _geomean([_ratio(r, "ember", "ember_compiled") for r in timed])
    torch_speed = _geomean([_ratio(r, "torch", "torch_compiled") for r in timed])
    versus = _geomean([_ratio(r, "ember_compiled", "torch_compiled") for r in timed])
    eager_versus = _geomean([_ratio(r, "ember", "torch") for r in timed])
    out["geomean speedup compiled/eager, ember (passing models)"] = f"{speed:.2f}x" if speed else "-"
    out["geomean speedup compiled/eager, torch (same models)"] = f"{torch_speed:.2f}x" if torch_speed else "-"
    out["geomean time compiled ember / torch.compile"] = f"{versus:.2f}x" if versus else "-"
    out["geomean time eager ember / eager torch"] = f"{eager_versus:.2f}x" if eager_versus else "-"
    ours = [r.compile_s for r in timed if r.compile_s]
    theirs = [r.torch_compile_s for r in timed if r.torch_compile_s]
    out["mean compile time (first call), ember / torch"] = (
        f"{sum(ours) / len(ours):.2f} s / {sum(theirs) / len(theirs):.2f} s" if ours and theirs else "-"
    )
    return out


def _fmt(value, scale=1.0, digits=2):
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value * scale:.{digits}f}"


def _sci(value):
    return "-" if value is None else f"{value:.1e}"


def render(rows, args, specs, elapsed):
    """The Markdown section of one run."""
    threads = args.threads
    dry_run = f" ({args.scale.upper()} sizes)" if args.scale != args.device else ""
    lines = [
        f"## {args.device.upper()}, {args.mode}{dry_run}"
        + (f", autocast {args.autocast}" if args.autocast else ""),
        "",
        f"Backend `{args.backend}`, fullgraph={args.fullgraph}, {threads} thread(s) for both libraries, "
        f"{args.repeats} interleaved repeats (minimum kept). Run of {elapsed / 60:.1f} min on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average {args.load[0]:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end ({os.cpu_count()} CPUs): on a shared machine the times are noisy, "
        "compare the ratios of one row. "
        + ("Float32 without TF32 in both libraries (torch's cuDNN default is TF32: turned off). "
           if args.device == "cuda" and not args.autocast else "")
        + (f"Each step's forward and loss run in `autocast({args.device!r}, dtype={args.autocast})` in both "
           "libraries (the weights, gradients and optimizer stay float32). " if args.autocast else "")
        + (f"Sizes: each model's `{args.scale}_scale` (listed under Models). " if args.scale != "cpu" else "")
        + "Compile times are first calls, "
        + ("with empty on-disk caches for both compilers (`--cold`)." if args.cold else
           "with the on-disk caches of both compilers as earlier runs left them (a repeated run mostly hits them; "
           "`--cold` starts both from empty caches)."),
        "",
        "| label | value |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v} |" for k, v in summary(rows).items()]
    worst = sorted((r for r in rows if _ratio(r, "ember_compiled", "torch_compiled")),
                   key=lambda r: -_ratio(r, "ember_compiled", "torch_compiled"))[:5]
    if worst:
        lines += ["", "Worst five (compiled Ember / torch.compile time): " + ", ".join(
            f"{r.name} {_ratio(r, 'ember_compiled', 'torch_compiled'):.2f}x" for r in worst) + "."]
    lines += [
        "",
        "Check: compiled == eager Ember "
        + (f"on the outputs, elementwise |a - b| <= {ATOL:g} + {RTOL:g} |b| (`max diff`: the largest |a - b|)."
           if args.mode == "inference" else
           f"over {CHECK_STEPS} SGD steps: step 1's loss to {ATOL:g} + {RTOL:g} |b| and every parameter's gradient "
           f"to ||g - e|| <= {GRAD_RTOL:g} max(||e||, {GRAD_FLOOR:g} max_p ||e_p||) + {GRAD_NOISE:g} ||n - e|| (n: the "
           f"gradient of an eager twin with its weights moved by one ulp); steps 2-{CHECK_STEPS}' losses to "
           f"{DRIFT_RTOL:g} of the first loss (float32 rounding drifts chaotically in batch-norm nets at batch 2: "
           "see the README). `max diff`: step 1's |loss difference| / the worst gradient's error / the worst later "
           "|loss difference| over the first loss.")
        + " What is compiled: the model (the loss, backward and "
        "optimizer run eagerly). `fullgraph`: the model captured with `fullgraph=True` (backend `eager`) gives "
        "eager's result. `breaks`: ember (torch.compile's for the same model in brackets). Compile: the first "
        "compiled call (capture + backend + the step). "
        "Times: ms per step; `x`: eager / compiled; `vs torch`: compiled Ember / torch.compile time.",
        "",
        "| model | domain | status | fullgraph | graphs | breaks | max diff | compile s (torch) "
        "| ember eager | ember compiled | x | torch eager | torch.compile | x | vs torch |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        t = r.times
        torch_breaks = "no graph" if r.torch_graphs == 0 else "?" if r.torch_breaks is None else r.torch_breaks
        breaks = "-" if r.breaks is None else f"{r.breaks} ({torch_breaks})"
        diff = _sci(r.max_diff)
        if r.grad_error is not None or r.drift is not None:
            diff += f" / {_sci(r.grad_error)} / {_sci(r.drift)}"
        speed = _ratio(r, "ember", "ember_compiled")
        torch_speed = _ratio(r, "torch", "torch_compiled")
        versus = _ratio(r, "ember_compiled", "torch_compiled")
        lines.append(
            f"| {r.name} | {r.domain} | {r.status} | {r.fullgraph} | {'-' if r.graphs is None else r.graphs} "
            f"| {breaks} | {diff} | {_fmt(r.compile_s, 1, 1)} ({_fmt(r.torch_compile_s, 1, 1)}) "
            f"| {_fmt(t.get('ember'), 1e3)} | {_fmt(t.get('ember_compiled'), 1e3)} | {_fmt(speed)} "
            f"| {_fmt(t.get('torch'), 1e3)} | {_fmt(t.get('torch_compiled'), 1e3)} | {_fmt(torch_speed)} "
            f"| {_fmt(versus)} |"
        )
    problems = [r for r in rows if r.error or r.reasons or r.fullgraph_error or r.warnings or not r.passed]
    if problems:
        lines += ["", "Failures and graph breaks:", ""]
        for r in problems:
            repro = EXPECTED_FAILURES.get(r.name)
            head = f"- **{r.name}**: {r.status}" + (f" (repro `{repro}`)" if repro else "")
            if r.error:
                head += f": {r.error}"
            if r.mismatch:
                head += f": {r.mismatch}"
            if r.fullgraph_error:
                head += f"; fullgraph=True: {r.fullgraph_error}"
            lines.append(head)
            lines += [f"  - break: {reason}" for reason in r.reasons]
            lines += [f"  - logged: {warning}" for warning in r.warnings]
    lines += ["", "Models:", ""]
    for name, spec in specs.items():
        scale = registry.sizes(spec, args.scale)
        here = f" Sizes here ({args.scale}): " + ", ".join(f"{k}={v}" for k, v in scale.items()) + "." if scale else ""
        notes = spec.notes or "-"
        lines.append(f"- **{name}** ({spec.domain}): {notes}{'' if notes.endswith('.') or not here else '.'}{here}")
    return "\n".join(lines) + "\n"


HEADER = """# ember.compile model suite

Written by `python benchmarks/models/run.py` (see `benchmarks/models/README.md`): every model of
`benchmarks/models/` in Ember eager, `ember.compile`, PyTorch eager and `torch.compile`, in one process
per device and mode. Each section below is replaced by the next run of its device and mode.
"""


def write_section(path, key, text):
    """Replace (or append) the ``key`` section of the Markdown file at ``path``."""
    begin, end = f"<!-- begin {key} -->", f"<!-- end {key} -->"
    old = path.read_text() if path.exists() else HEADER
    block = f"{begin}\n{text}{end}\n"
    if begin in old and end in old:
        before, rest = old.split(begin, 1)
        new = before + block + rest.split(end, 1)[1].lstrip("\n")
    else:
        new = old.rstrip("\n") + "\n\n" + block
    path.write_text(new)


def plot(rows, path, title):
    """Bar chart of the compiled/eager speedups of each model, Ember next to PyTorch (skipped without
    matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    names = [r.name for r in rows]
    ours = [_ratio(r, "ember", "ember_compiled") or 0.0 for r in rows]
    theirs = [_ratio(r, "torch", "torch_compiled") or 0.0 for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(rows) + 2), 4))
    ax.bar(x - 0.2, ours, 0.4, label="ember.compile / ember eager")
    ax.bar(x + 0.2, theirs, 0.4, label="torch.compile / torch eager")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(x, names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("speedup (eager time / compiled time)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--mode", choices=("inference", "training"), default="training")
    parser.add_argument("-k", dest="names", action="append", default=[], help="run models whose name contains NAME")
    parser.add_argument("--backend", default="inductor", help="ember.compile and torch.compile backend")
    parser.add_argument("--fullgraph", action="store_true", help="compile (and time) with fullgraph=True")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved timing repeats (minimum kept)")
    parser.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS_MODELS.md")
    parser.add_argument("--plot", type=Path, default=None, help="default benchmarks/models/models_<device>_<mode>.png")
    parser.add_argument("--cold", action="store_true", help="empty compile caches for both libraries (fresh dirs)")
    parser.add_argument("--no-torch", action="store_true", help="skip PyTorch (no comparison columns)")
    parser.add_argument("--verbose", "-v", action="store_true", help="print tracebacks of failures")
    parser.add_argument("--autocast", choices=tuple(AUTOCAST_TOLERANCES), default=None,
                        help="run each step's forward and loss in autocast to this dtype (both libraries)")
    # a dry run of one device's sizes on another (--device cpu --scale cuda: the CUDA sizes on the CPU)
    parser.add_argument("--scale", choices=registry.SCALES, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.scale = args.scale or args.device
    return args


def _use_autocast(dtype):
    """Run every step under autocast to ``dtype`` (None: float32) and check to that precision's tolerances."""
    global AUTOCAST, RTOL, ATOL, GRAD_RTOL
    AUTOCAST = dtype
    if dtype is not None:
        tolerances = AUTOCAST_TOLERANCES[dtype]
        RTOL, ATOL, GRAD_RTOL = tolerances["RTOL"], tolerances["ATOL"], tolerances["GRAD_RTOL"]


def main(argv=None):
    args = parse_args(argv)
    _use_autocast(args.autocast)
    if args.cold:  # before either compiler is imported: both read their cache folder from the environment
        cold = Path(tempfile.mkdtemp(prefix="models_cold_"))
        os.environ["EMBER_INDUCTOR_CACHE_DIR"] = str(cold / "ember")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cold / "torch")
        print(f"--cold: compile caches in {cold}")
    import ember

    torch = None
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            print("PyTorch is not installed: running without the comparison", file=sys.stderr)
    if args.backend == "aot_eager" or args.backend == "inductor":
        import ember._inductor  # noqa: F401  (registers the backends)
    args.threads = ember.get_num_threads()
    args.load = os.getloadavg()
    if args.device == "cuda":
        ember.backends.cuda.matmul.allow_tf32 = False
    if torch is not None:
        torch.set_num_threads(args.threads)
        if args.device == "cuda":
            # ember's CUDA convolutions and matmuls compute float32 in float32: so does torch here (its cuDNN
            # convolutions default to TF32), so that both libraries do the same arithmetic
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
    specs = registry.load_all()
    if args.names:
        specs = {n: s for n, s in specs.items() if any(k in n for k in args.names)}
    if not specs:
        raise SystemExit(f"no model matches {args.names}")
    start = time.perf_counter()
    rows = []
    for name, spec in specs.items():
        t0 = time.perf_counter()
        row = run_model(spec, args, ember, torch)
        rows.append(row)
        speed = _ratio(row, "ember", "ember_compiled")
        print(
            f"{name:24s} {row.status:18s} fullgraph={row.fullgraph:8s} breaks={row.breaks} "
            f"speedup={_fmt(speed)} vs torch={_fmt(_ratio(row, 'ember_compiled', 'torch_compiled'))} "
            f"({time.perf_counter() - t0:.0f} s) {row.error}",
            flush=True,
        )
    elapsed = time.perf_counter() - start
    key = f"{args.device} {args.mode}" + (" fullgraph" if args.fullgraph else "")
    if args.autocast:
        key += f" autocast {args.autocast}"
    if args.scale != args.device:  # a dry run of another device's sizes keeps its own section
        key += f" {args.scale} sizes"
    write_section(args.output, key, render(rows, args, specs, elapsed))
    amp = f"_{args.autocast}" if args.autocast else ""
    plot_path = args.plot or HERE / f"models_{args.device}_{args.mode}{amp}.png"
    if plot(rows, plot_path, f"{args.device} {args.mode}, backend {args.backend}"):
        print(f"plot: {plot_path}")
    for label, value in summary(rows).items():
        print(f"{label}: {value}")
    print(f"wrote {args.output} ({elapsed / 60:.1f} min)")
    return rows


if __name__ == "__main__":
    main()
