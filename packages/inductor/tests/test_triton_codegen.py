"""The Triton code generator's text (no Triton needed): kernel kinds, masks, size arguments, reductions.

The graphs are lowered and scheduled as the C++ path does; :func:`ember._inductor.codegen.triton.generate`
turns the schedule into a module's text, which these tests read. Running the kernels is
test_triton_interpret.py's job.
"""

from __future__ import annotations

import ast

import pytest
import sympy

import ember
from ember._inductor import ir
from ember._inductor.aot.decompositions import inductor_decompositions
from ember._inductor.codegen import triton as tgen
from ember._inductor.codegen.wrapper import _lower
from ember.fx.experimental.proxy_tensor import make_fx


def _source(fn, *inputs, **kwargs):
    gm = make_fx(fn, decomposition_table=inductor_decompositions())(*inputs)
    _, scheduler = _lower(gm, list(inputs))
    return tgen.generate(scheduler, **kwargs)


def _kernels(src):
    return [k for step in src.steps if isinstance(step, list) for k in step]


def test_module_is_valid_python_with_one_comment_per_node():
    src = _source(lambda a, b: ember.sigmoid(a) * b + 1, ember.randn(4, 6), ember.randn(6))
    ast.parse(src.source)  # the module is Python
    assert src.source.startswith("import triton")
    (kernel,) = _kernels(src)
    assert kernel.kind == "pointwise"
    assert "@triton.jit" in kernel.source
    assert kernel.source.count("# buf") == 1  # one fused node, one comment
    assert str(src) == src.source


def test_pointwise_masks_the_tail_and_takes_sizes_as_arguments():
    src = _source(lambda a: ember.exp(a) + 1, ember.randn(5, 7))
    (kernel,) = _kernels(src)
    text = kernel.source
    assert "xmask = xindex < xnumel" in text
    assert "xnumel = ks0 * ks1" in text
    assert [int(s) for s in kernel.sizes] == [5, 7]
    assert "ks0, ks1, XBLOCK: tl.constexpr" in text
    assert "RBLOCK" not in text  # pointwise kernels have one block size
    assert "tl.store(" in text and ", xmask)" in text
    assert "x1 = xindex % ks1" in text and "x0 = (xindex // ks1)" in text


def test_broadcast_and_permuted_inputs_index_by_their_strides():
    a = ember.randn(3, 4)
    src = _source(lambda t, b: t.t() * b, a, ember.randn(3))
    text = _kernels(src)[0].source
    # the transposed input is read at 4*x1 + x0 (its strides), the broadcast one along x1 only
    assert "tl.load(arg0_1_ptr + (" in text
    assert "(4 * x1)" in text or "4*x1" in text


def test_half_inputs_compute_in_float32_and_round_on_store():
    x = ember.randn(8).to(ember.float16)
    text = _kernels(_source(lambda t: t * 2 + 1, x))[0].source
    assert ".to(tl.float32)" in text
    assert ".to(tl.float16)" in text


def test_small_rows_give_a_persistent_reduction():
    src = _source(lambda a: a.sum(1), ember.randn(8, 100))
    (kernel,) = _kernels(src)
    assert kernel.kind == "persistent"
    assert "rbase = tl.arange(0, RBLOCK)[None, :]" in kernel.source
    assert "for roffset" not in kernel.source
    assert "tl.reduce(" in kernel.source and "th.combine_sum" in kernel.source
    assert "xmask & rmask" in kernel.source


def test_long_rows_loop():
    src = _source(lambda a: a.amax(1), ember.randn(16, 3000))
    (kernel,) = _kernels(src)
    assert kernel.kind == "looped"
    assert "for roffset in range(0, ks1, RBLOCK):" in kernel.source
    assert "float('-inf')" in kernel.source  # masked lanes hold max's identity
    assert "th.combine_max" in kernel.source


def test_persistent_limit_is_a_parameter():
    x = ember.randn(8, 100)
    src = _source(lambda a: a.sum(1), x, persistent_limit=64)
    assert _kernels(src)[0].kind == "looped"


def test_few_long_rows_split_into_two_kernels():
    src = _source(lambda a: a.sum() * 2, ember.randn(tgen.SPLIT_MIN_ELEMENTS + 5))
    first, second = src.steps[0]
    assert first.kind == "split" and second.kind == "split_combine"
    assert first.name.endswith("_split")
    assert f"xindex * {tgen.SPLIT} + chunk" in first.source
    assert "partial0_ptr" in first.source and "partial0_ptr" in second.source
    assert first.scratch[0][1] == tgen.SPLIT
    ast.parse(src.source)


@pytest.mark.parametrize("rtype,fn", [
    ("sum", lambda a: a.sum(1)), ("prod", lambda a: a.prod(1)), ("max", lambda a: a.amax(1)),
    ("min", lambda a: a.amin(1)), ("argmax", lambda a: a.argmax(1)), ("argmin", lambda a: a.argmin(1)),
    ("any", lambda a: (a > 0).any(1)), ("all", lambda a: (a > 0).all(1)),
])
def test_every_reduction_type_has_a_combine(rtype, fn):
    src = _source(fn, ember.randn(4, 9))
    text = src.source
    combine = tgen.reduction_combine(rtype, ember.float32)
    assert combine in text, rtype
    if rtype.startswith("arg"):
        assert "2147483647" in text  # masked lanes never win the index


def test_every_ir_op_and_reduction_type_has_a_rule():
    assert set(tgen.OP_RULES) == set(ir.OPS)
    for rtype in ir.REDUCTION_TYPES:
        assert tgen.reduction_combine(rtype, ember.float32).startswith("th.combine_")
        tgen.reduction_identity(rtype, ember.float32)
        tgen.reduction_identity(rtype, ember.int32)


def test_softmax_is_one_kernel_that_reads_its_row_once():
    src = _source(lambda a: ember.softmax(a, -1), ember.randn(4, 6))
    (kernel,) = _kernels(src)
    assert kernel.kind == "persistent"
    assert kernel.source.count("tl.reduce(") == 2  # max, then sum of exp
    # persistent: the max, the sum and the normalisation share the row (one load, exp computed once)
    assert kernel.source.count("tl.load(") == 1
    assert kernel.source.count("tl.exp(") == 1
    assert kernel.source.count("tl.store(") == 1


def test_looped_softmax_runs_its_normalisation_as_a_row_loop():
    src = _source(lambda a: ember.softmax(a, -1), ember.randn(4, 3000))
    (kernel,) = _kernels(src)
    assert kernel.kind == "looped"
    assert "y0 = rindex" in kernel.source  # the normalisation loops along the row after the reductions
    assert kernel.source.count("for roffset") == 3


def test_looped_kernels_compute_row_invariants_once_before_each_loop():
    src = _source(lambda a: ember.nn.functional.layer_norm(a, (3000,)), ember.randn(4, 3000))
    (kernel,) = _kernels(src)
    assert kernel.kind == "looped"
    text = kernel.source
    loops = [i for i, line in enumerate(text.splitlines()) if "for roffset" in line]
    lines = text.splitlines()
    assert len(loops) == 2  # the two sums share one pass; the normalisation is the second loop
    rsqrt = next(i for i, line in enumerate(lines) if "tl.sqrt(" in line)
    shift = [i for i, line in enumerate(lines) if "tl.load(" in line and "r0" not in line and "y0" not in line]
    # the row's scale: between the reduction loop and the normalising loop, not inside either
    assert loops[0] < rsqrt < loops[1] and not lines[rsqrt].startswith("        ")
    # the shift of the one-pass moments (the row's first element) is loaded once, before the first loop
    assert len(shift) == 1 and shift[0] < loops[0]
    # inside the loops only what changes along the row
    for line in lines[loops[1]:]:
        if line.startswith("        ") and "=" in line and "tl.load" not in line:
            assert "sqrt" not in line and "3000.0" not in line


def test_index_expressions_print_as_triton_arithmetic():
    x0, x1 = ir.index_vars(2, "x")
    assert tgen.texpr(ir.FloorDiv(x0, 4) + ir.ModIndex(x1, 3) * 2) in (
        "((x0 // 4) + (2 * (x1 % 3)))", "((2 * (x1 % 3)) + (x0 // 4))")
    assert tgen.texpr(sympy.Min(x0, 5)).startswith("tl.minimum(")


def test_autotune_configs_fit_the_kernel_kinds():
    from ember._inductor import autotune

    pw = autotune.configs("pointwise", 100, None)
    assert pw[0]["XBLOCK"] == 128  # the interpreter's pick: the whole output in one program
    persistent = autotune.configs("persistent", 64, 300)
    assert all(c["RBLOCK"] == 512 for c in persistent)  # the whole row in one block
    assert all(c["XBLOCK"] * c["RBLOCK"] <= autotune.MAX_TILE for c in persistent)
    looped = autotune.configs("looped", 4, 5000)
    assert all(c["RBLOCK"] < 5000 for c in looped)
    assert autotune.configs("split_combine", 1, 64) == [{"XBLOCK": 1, "RBLOCK": tgen.SPLIT, "num_warps": 2}]


def test_autotuner_benchmarks_once_and_a_second_process_reads_the_choice(tmp_path, monkeypatch):
    from ember._inductor import autotune

    module_file = tmp_path / "kabc.py"
    module_file.write_text("")
    kernel = tgen.TritonKernelSource("kernel0", "looped", [], [], 4, 5000, "")
    timings = {1024: 2.0, 2048: 3.0, 256: 1.5, 64: 5.0, 512: 0.5}
    timed = []

    def fake_time(run, cfg, repeat=5):
        timed.append(cfg)
        return timings[cfg["RBLOCK"]]

    monkeypatch.setattr(autotune, "_time", fake_time)
    tuner = autotune.Autotuner(module_file, benchmark=True)
    best = tuner.choose(kernel, 4, 5000, run=None)
    assert best["RBLOCK"] == 512 and tuner.benchmarked == 1
    assert len(timed) == len(autotune.configs("looped", 4, 5000))
    assert tuner.choose(kernel, 4, 5000, run=None) == best and len(timed) == len(autotune.configs("looped", 4, 5000))
    # another process: the choice comes from the file next to the module, nothing is timed
    again = autotune.Autotuner(module_file, benchmark=True)
    assert again.choose(kernel, 4, 5000, run=None) == best and again.benchmarked == 0
    assert (tmp_path / "kabc.autotune.json").exists()
    # the interpreter's rule: no timing, the first config
    plain = autotune.Autotuner(tmp_path / "kother.py", benchmark=False)
    assert plain.choose(kernel, 4, 5000, run=None) == autotune.configs("looped", 4, 5000)[0]


def test_sibling_reductions_share_one_pass_over_the_row():
    # layer_norm's mean and variance sums: one loop reading the row once, then the normalisation loop
    x = ember.randn(8, 2000)
    src = _source(lambda a: ember.nn.functional.layer_norm(a, (2000,)), x)
    (kernel,) = _kernels(src)
    assert kernel.kind == "looped"
    assert kernel.source.count("for roffset") == 2
    assert kernel.source.count("_acc = tl.full(") == 2  # two accumulators in the shared loop


def test_compile_fx_decides_the_code_generator_on_the_real_inputs(monkeypatch):
    # aot hands compile_fx_inner meta tensors (no device): the choice is made on compile_fx's real inputs
    from ember._inductor import compile_fx as cfx

    x = ember.randn(4, requires_grad=True)
    seen_by_uses_triton, chosen = [], []

    def fake_uses_triton(inputs):
        seen_by_uses_triton.append([getattr(t, "device", None) for t in inputs])
        return any(t is x for t in inputs)  # "x is on cuda"

    devices = []

    def fake_core(triton):
        def core(gm, example_inputs, device=None):
            chosen.append(triton)
            devices.append(device)
            return lambda *args: tuple(gm(*args)) if isinstance(gm(*args), (tuple, list)) else (gm(*args),)

        return core

    monkeypatch.setattr(cfx, "uses_triton", fake_uses_triton)
    monkeypatch.setattr(cfx, "_core_compile", fake_core(False))
    monkeypatch.setattr(cfx, "_triton_compile", fake_core(True))
    compiled = cfx.compile_fx(make_fx(lambda a: a.sin() * 2)(x), [x])
    compiled(x).sum().backward()
    assert chosen == [True, True]  # the forward and the backward both go to Triton
    # with the real inputs' device (the meta examples don't say it; factories naming it lower to loops)
    assert [d.type for d in devices] == ["cpu", "cpu"]
    assert seen_by_uses_triton[0][0].type == "cpu"  # asked once, about the real input
    assert len(seen_by_uses_triton) == 1


def test_real_device_skips_cpu_and_meta_tensors():
    from ember._inductor.compile_fx import real_device

    meta = ember.empty(2, device="meta")
    assert real_device([meta, ember.ones(2), 3]).type == "cpu"
    fake_cuda = type("T", (ember.Tensor,), {})  # a tensor reporting another device, without a GPU
    t = ember.ones(2)
    t.__class__ = fake_cuda
    fake_cuda.device = property(lambda self: ember.device("cuda", 0))
    assert real_device([meta, ember.ones(2), t]) == ember.device("cuda", 0)


def test_kernel_times_table_lists_kernels_by_total_time(monkeypatch):
    from ember._inductor.runtime import triton_launch

    monkeypatch.setattr(triton_launch, "kernel_times", {("k1.py", "kernel0", "pointwise"): [2, 1.0],
                                                        ("extern", "matmul", ""): [4, 6.0]})
    lines = triton_launch.kernel_times_table().splitlines()
    assert "matmul" in lines[1] and "kernel0" in lines[2]  # largest total first
    assert lines[1].split()[:3] == ["6.000", "4", "1500.0"]  # total ms, launches, mean us
    with triton_launch.timer(None):  # timing off: nothing recorded, nothing synchronised
        pass
    assert len(triton_launch.kernel_times) == 2
