"""``aot_function``, ``aot_module``, ``aot_module_simplified``: compile a function's forward and backward.

A call of the returned callable:

1. flattens its arguments (a pytree) and looks up the compiled pair for their signature
   (per tensor: shape, strides, dtype, device, requires_grad; the other arguments' values;
   grad mode). A miss traces and compiles; a hit does not retrace;
2. without grad (no tensor input requires grad, or grad mode off) runs the compiled
   forward of the functional forward graph (:func:`~ember._inductor.aot.joint.trace_forward`);
3. with grad, traces the joint graph, splits it with ``partition_fn`` into a forward and a
   backward graph, compiles both, and runs them inside an ``ember.autograd.Function``
   whose backward calls the compiled backward on the values the forward saved;
4. copies the new values of inputs the function wrote in place into the caller's tensors,
   rebuilds outputs that are views of inputs as views of the real inputs (as eager mode
   returns them), and rebuilds the output pytree.

A compiler is ``compiler(gm, example_inputs) -> callable(*args) -> tuple/list of outputs``;
``example_inputs`` are meta tensors with the graph inputs' shapes, strides and dtypes.
"""

from __future__ import annotations

import ember
from ember.autograd import Function
from ember.utils._pytree import tree_flatten, tree_unflatten

from .. import debug
from ..exc import InductorError
from .joint import _fn_name, _trace
from .partitioners import default_partition

__all__ = ["aot_function", "aot_module", "aot_module_simplified", "default_partition"]


# ---------------------------------------------------------------------------- partitioning


# ---------------------------------------------------------------------------- runtime


_PLAIN_TENSORS = None  # (Tensor, Parameter): types whose fields hold what their properties return


def _plain_tensor_types():
    global _PLAIN_TENSORS
    if _PLAIN_TENSORS is None:
        _PLAIN_TENSORS = frozenset((ember.Tensor, ember.nn.Parameter))
    return _PLAIN_TENSORS


def _signature(flat, grad_enabled):
    """The cache key of a call: what the traced graphs were specialised on."""
    key = [grad_enabled]
    plain = _PLAIN_TENSORS or _plain_tensor_types()
    for a in flat:
        if type(a) in plain:
            # a model's call passes every parameter: the fields themselves (the array's shape and dtype,
            # the cached strides) cost a third of the properties, which are Python calls each; the numpy
            # dtype names the ember dtype one to one, the device's key tuple hashes in C
            data = a._data
            key.append((data.shape, a._strides or a.stride(), data.dtype, a._device._key, a._requires_grad))
        elif isinstance(a, ember.Tensor):  # a subclass may answer shape or requires_grad its own way
            # a sparse tensor has no strides: its layout instead (the graph never reads its nnz)
            layout = a.stride() if a.layout is ember.strided else a.layout
            key.append((a.shape, layout, a.dtype, a.device._key, a.requires_grad))
        else:
            try:
                hash(a)
                key.append(("C", type(a), a))
            except TypeError:
                key.append(("id", id(a)))
    return tuple(key)


def _example_inputs(gm):
    return [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]


def _as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _replay(tensor, chain):
    """Rebuild a view of a real tensor from a traced view chain."""
    for op, rest, kwargs, index in chain:
        tensor = op(tensor, *rest, **kwargs)
        if index is not None:
            tensor = tensor[index]
    return tensor


def _check_no_aliased_inputs(tensors, mutated):
    """Refuse a call where a written input shares memory with another input.

    The trace treats every input as its own storage; eager mode would let the other input
    see the write, so running the compiled graphs would give a different answer.
    """
    # one pass over the inputs, not one per written input (a batch-norm net writes half of its 300 inputs)
    written = {}
    for i in mutated:
        storage = tensors[i]._storage  # None until a view or an in-place op needed one: no alias then
        if storage is not None:
            written.setdefault(id(storage), i)
    if not written:
        return
    for j, other in enumerate(tensors):
        storage = other._storage
        if storage is None:
            continue
        i = written.get(id(storage))
        if i is not None and i != j:
            raise InductorError(
                f"aot: input {i} is written in place and shares memory with input {j}; compiled functions "
                "that write to an input need inputs that do not overlap (pass a clone)"
            )


class _Compiled:
    """The compiled graphs of one signature and how to run them."""

    def __init__(self, info, forward, backward=None, num_saved=0):
        self.info = info
        self.forward = forward
        self.backward = backward
        self.num_saved = num_saved

    def __call__(self, tensors):
        info = self.info
        if info.mutated_inputs:
            _check_no_aliased_inputs(tensors, info.mutated_inputs)
        if self.backward is None:
            fwd = _as_tuple(self.forward(*tensors))
        else:
            fwd = _CompiledFunction.apply(self, *tensors)
        if info.mutated_inputs:
            with ember.no_grad():
                for k, i in enumerate(info.mutated_inputs):
                    tensors[i].copy_(fwd[k])
        leaves = []
        for out in info.outputs:
            if out[0] == "graph":
                leaves.append(fwd[out[1]])
            elif out[0] == "alias":
                leaves.append(_replay(tensors[out[1]], out[2]))
            else:
                leaves.append(out[1])
        if info.out_spec.is_leaf():  # one output: no structure to rebuild
            return leaves[0]
        return tree_unflatten(leaves, info.out_spec)


def _detach_from_written_inputs(saved, written):
    """``saved`` with copies of the values that are (views of) inputs the runtime is about to overwrite.

    A partitioner may save an input and recompute from it in the backward; the copy back of
    the input's new value must not change what the backward reads.
    """
    storages = {id(w._storage) for w in written if w._storage is not None}
    ids = {id(w) for w in written}

    def overwritten(s):
        return isinstance(s, ember.Tensor) and (id(s) in ids or (s._storage is not None and id(s._storage) in storages))

    return tuple(s.clone() if overwritten(s) else s for s in saved)


def _contiguous(t):
    return t.contiguous() if isinstance(t, ember.Tensor) else t


class _CompiledFunction(Function):
    """Runs a compiled forward; its backward runs the compiled backward on the saved values."""

    @staticmethod
    def forward(ctx, compiled, *tensors):
        outs = _as_tuple(compiled.forward(*tensors))
        n = compiled.info.num_fwd_outputs
        fwd, saved = outs[:n], outs[n:]
        if compiled.info.mutated_inputs:
            saved = _detach_from_written_inputs(saved, [tensors[i] for i in compiled.info.mutated_inputs])
        ctx.compiled = compiled
        ctx.saved_is_tensor = tuple(isinstance(s, ember.Tensor) for s in saved)
        ctx.saved_other = tuple(s for s in saved if not isinstance(s, ember.Tensor))
        ctx.save_for_backward(*(s for s in saved if isinstance(s, ember.Tensor)))
        ctx.mark_non_differentiable(
            *(o for o, rg in zip(fwd, compiled.info.fwd_output_requires_grad) if not rg and isinstance(o, ember.Tensor))
        )
        return fwd

    @staticmethod
    def backward(ctx, *grad_outputs):
        compiled = ctx.compiled
        tensors = iter(ctx.saved_tensors)
        others = iter(ctx.saved_other)
        saved = [next(tensors) if is_tensor else next(others) for is_tensor in ctx.saved_is_tensor]
        # the tangents were traced contiguous; an incoming gradient may be an expanded one (sum's)
        tangents = [_contiguous(grad_outputs[i]) for i in compiled.info.tangent_outputs]
        grads = _as_tuple(compiled.backward(*saved, *tangents))
        return (None, *grads)


def _trace_graphs(fn, flat, spec, partition_fn, decompositions, like=None):
    """Trace ``fn`` for ``flat`` and split the joint graph: ``(positions, info, fw_gm, bw_gm)``, with
    ``bw_gm`` None when no gradient is needed (``fw_gm`` is then the inference graph). ``like``: a
    forward graph whose partition (what is saved, what recomputed) is copied instead of partitioning
    (the probe traces of a dynamic compile must split as the hint's did)."""
    positions = [i for i, a in enumerate(flat) if isinstance(a, ember.Tensor)]
    constants = list(flat)

    def flat_fn(*tensors):
        values = list(constants)
        for i, t in zip(positions, tensors):
            values[i] = t
        args, kwargs = tree_unflatten(values, spec)
        return fn(*args, **kwargs)

    flat_fn.__qualname__ = _fn_name(fn)
    tensors = [flat[i] for i in positions]
    needs_grad = ember.is_grad_enabled() and any(t.requires_grad for t in tensors)
    if not needs_grad:
        gm, info = _trace(flat_fn, tensors, joint=False, decompositions=decompositions)
        debug.stage("functional_graph", gm.code)
        return positions, info, gm, None
    joint, info = _trace(flat_fn, tensors, joint=True, decompositions=decompositions)
    debug.stage("joint_graph", joint.code)
    if like is not None:
        fw_gm, bw_gm = partition_like(like, joint, num_fwd_outputs=info.num_fwd_outputs)
    else:
        partition = partition_fn or default_partition
        fw_gm, bw_gm = partition(joint, _example_inputs(joint), num_fwd_outputs=info.num_fwd_outputs)
    # the two halves are written by the partitioner ("partition") and by compile_fx per compiled graph
    from .rng import check_backward_draws_nothing

    check_backward_draws_nothing(bw_gm)
    return positions, info, fw_gm, bw_gm



def partition_like(reference, joint_gm, *, num_fwd_outputs):
    """Split ``joint_gm`` saving and recomputing the nodes (by name) that ``reference`` (a forward graph a
    partitioner made from the same joint graph traced at other sizes) saved and recomputed: the traces
    of a dynamic-shape compile must split alike, and byte costs change with the sizes."""
    from .partitioners import _build, _Joint

    info = reference.partition_info
    joint = _Joint(joint_gm, num_fwd_outputs)
    by_name = {n.name: n for n in joint.nodes}
    missing = [n for n in (*info.saved, *info.recomputed) if n not in by_name]
    if missing:
        from ..dynamic import NotDynamic

        raise NotDynamic(f"the joint graphs differ across sizes (no node {missing[0]})")
    return _build(joint, [by_name[n] for n in info.saved], [by_name[n] for n in info.recomputed],
                  info.partitioner)


def _compile(fn, flat, spec, fw_compiler, bw_compiler, partition_fn, decompositions, inference_compiler):
    """Trace and compile ``fn`` for the signature of ``flat``; return a :class:`_Compiled`."""
    positions, info, fw_gm, bw_gm = _trace_graphs(fn, flat, spec, partition_fn, decompositions)
    if bw_gm is None:
        compiler = inference_compiler or fw_compiler
        return positions, _Compiled(info, compiler(fw_gm, _example_inputs(fw_gm)))
    forward = fw_compiler(fw_gm, _example_inputs(fw_gm))
    backward = (bw_compiler or fw_compiler)(bw_gm, _example_inputs(bw_gm))
    num_saved = len(_as_tuple(list(fw_gm.graph.nodes)[-1].args[0])) - info.num_fwd_outputs
    return positions, _Compiled(info, forward, backward, num_saved)


def aot_function(fn, fw_compiler, bw_compiler=None, partition_fn=None, decompositions=None, inference_compiler=None):
    """Compile ``fn``'s forward and backward graphs ahead of time.

    Args:
        fn (callable): takes tensors (any pytree of them, plus other values) and returns a
            tensor or a pytree of tensors and other values.
        fw_compiler (callable): ``(gm, example_inputs) -> callable`` for the forward graph.
        bw_compiler (callable or None): the same for the backward graph (default ``fw_compiler``).
        partition_fn (callable or None): ``(joint_gm, joint_inputs, *, num_fwd_outputs) ->
            (fw_gm, bw_gm)``; default :func:`default_partition`.
        decompositions (dict[Op, callable] or None): ops to decompose while tracing.
        inference_compiler (callable or None): compiles the forward graph when no gradient is
            needed (default ``fw_compiler``).

    Returns:
        callable: same arguments and results as ``fn``, differentiable; it compiles once per
        input signature (shapes, strides, dtypes, devices, requires_grad, other arguments'
        values, grad mode). ``compiled.cache`` holds the compiled entries.

    Raises:
        ember._inductor.exc.InductorError: at the first call of a signature, when ``fn``
            cannot be traced (it reads tensor values to decide its control flow, or writes
            into a tensor it does not take as an input).

    Example:
        >>> import ember
        >>> from ember._inductor.aot.api import aot_function
        >>> f = aot_function(lambda x: x.sin() * 2, fw_compiler=lambda gm, ex: gm)
        >>> x = ember.randn(3, requires_grad=True)
        >>> f(x).sum().backward()
    """
    cache = {}
    positional_specs = {}  # number of positional tensors -> the spec of (args, {}): calls without pytrees

    def lookup(flat, spec, spec_key):
        key = (_signature(flat, ember.is_grad_enabled()), spec_key)
        entry = cache.get(key)
        if entry is None:
            entry = cache[key] = _compile(
                fn, flat, spec, fw_compiler, bw_compiler, partition_fn, decompositions, inference_compiler
            )
        return entry

    def compiled(*args, **kwargs):
        if not kwargs and all(isinstance(a, ember.Tensor) for a in args):  # the common call: skip the pytree walk
            spec = positional_specs.get(len(args))
            if spec is None:
                spec = positional_specs[len(args)] = tree_flatten((args, {}))[1]
            flat = list(args)
            spec_key = len(args)  # hashing a TreeSpec walks it: an int names this structure
        else:
            flat, spec = tree_flatten((args, kwargs))
            spec_key = spec
        positions, entry = lookup(flat, spec, spec_key)
        return entry([flat[i] for i in positions])

    def prepare(*args, **kwargs):
        """Trace and compile for these arguments' signature without running."""
        flat, spec = tree_flatten((args, kwargs))
        plain = not kwargs and all(isinstance(a, ember.Tensor) for a in args)
        lookup(flat, spec, len(args) if plain else spec)

    compiled.cache = cache
    compiled.prepare = prepare
    compiled.__name__ = getattr(fn, "__name__", "aot_function")
    compiled.__wrapped__ = fn
    return compiled


def _lifted_call(mod):
    """``fn(*params_and_buffers, *args, **kwargs)`` running ``mod`` with those tensors, and their names.

    The tensors come first and flat (not one list argument), so a call of only tensors takes
    :func:`aot_function`'s path without a pytree walk.
    """
    from ember.func import functional_call

    names = [n for n, _ in mod.named_parameters()] + [n for n, _ in mod.named_buffers()]
    count = len(names)

    def call(*flat, **kwargs):
        return functional_call(mod, dict(zip(names, flat[:count])), flat[count:], kwargs)

    call.__qualname__ = type(mod).__qualname__ + ".forward"
    return names, call


class AOTModule(ember.nn.Module):
    """The module :func:`aot_module` returns: runs the compiled graphs with the module's live parameters.

    The traced graphs depend on the submodules' ``training`` flags (batch norm, dropout), so
    one :func:`aot_function` is kept per combination of flags.
    """

    def __init__(self, mod, make_compiled):
        super().__init__()
        self.orig_module = mod
        self._make_compiled = make_compiled
        self._by_mode = {}

    def _state(self):
        mod = self.orig_module
        return [p for _, p in mod.named_parameters()] + [b for _, b in mod.named_buffers()]

    @property
    def _compiled(self):
        """The :func:`aot_function` for the submodules' current training flags."""
        mode = tuple(m.training for m in self.orig_module.modules())
        compiled = self._by_mode.get(mode)
        if compiled is None:
            compiled = self._by_mode[mode] = self._make_compiled()
        return compiled

    def forward(self, *args, **kwargs):
        """Runs the compiled forward with the module's current parameters and buffers."""
        return self._compiled(*self._state(), *args, **kwargs)


def aot_module(mod, fw_compiler, bw_compiler=None, partition_fn=None, decompositions=None, inference_compiler=None):
    """:func:`aot_function` for an ``nn.Module``: its parameters and buffers become inputs (primals).

    Buffers the module updates in place (batch norm's running statistics) are written back
    after each call, as in eager mode. Switching ``train()``/``eval()`` compiles again (once
    per combination of the submodules' flags).

    Returns:
        AOTModule: call it like ``mod``; it reads ``mod``'s parameters at every call.
    """
    _names, call = _lifted_call(mod)
    return AOTModule(
        mod, lambda: aot_function(call, fw_compiler, bw_compiler, partition_fn, decompositions, inference_compiler)
    )


def _state_refs(mod):
    """``(dict, key)`` of each parameter, then each buffer, of ``mod`` in ``named_parameters`` order."""
    refs = []
    for kind, named in (("_parameters", mod.named_parameters()), ("_buffers", mod.named_buffers())):
        for name, _ in named:
            prefix, _, attr = name.rpartition(".")
            owner = mod.get_submodule(prefix) if prefix else mod
            refs.append((getattr(owner, kind), attr))
    return refs


def aot_module_simplified(
    mod, example_inputs, fw_compiler, bw_compiler=None, partition_fn=None, decompositions=None,
    inference_compiler=None,
):
    """Compile a module (a captured ``GraphModule``) called with flat positional tensors.

    What ``compile_fx`` uses: the module's parameters and buffers are lifted to primals, the
    graphs are traced and compiled now for ``example_inputs`` (errors surface here), and
    the result takes the same positional inputs.

    Args:
        mod (ember.nn.Module): called as ``mod(*example_inputs)``.
        example_inputs (list): example positional inputs.
        fw_compiler, bw_compiler, partition_fn, decompositions, inference_compiler: as in
            :func:`aot_function`.

    Returns:
        callable: ``forward(*args)`` returning what ``mod`` returns.
    """
    compiled = aot_module(mod, fw_compiler, bw_compiler, partition_fn, decompositions, inference_compiler)
    compiled._compiled.prepare(*compiled._state(), *example_inputs)
    # A call reads the current tensors of the parameters and buffers the module had when it was compiled
    # (as PyTorch's aot_module_simplified lifts them once); looked up through the dicts that hold them,
    # so a parameter assigned anew is seen, without walking the module tree per call.
    state_refs = _state_refs(mod)
    modules = list(mod.modules())
    by_mode = compiled._by_mode

    def forward(*args):
        fn = by_mode.get(tuple(m.training for m in modules))
        if fn is None:
            fn = compiled._compiled
        return fn(*[store[key] for store, key in state_refs], *args)

    forward.zero_grad = mod.zero_grad if hasattr(mod, "zero_grad") else None
    forward.named_parameters = mod.named_parameters
    forward.named_buffers = mod.named_buffers
    return forward


def _sized_outputs(infos, sizes):
    """``{output index: entry}`` for the outputs that differ across the traces (one :class:`TraceInfo` per
    trace): an int that is a size, or a view of an input whose view arguments are sizes, written with
    SymPy expressions (resolved per call). Raises NotDynamic for other differences."""
    from ..dynamic import NotDynamic

    sized = {}
    for k, out in enumerate(infos[0].outputs):
        kinds = [i.outputs[k] for i in infos]
        if any(o[0] != out[0] for o in kinds):
            raise NotDynamic("the outputs differ in kind across sizes")
        if out[0] == "graph":
            continue
        if sizes is None and any(o != out for o in kinds):
            raise NotDynamic("an output is a value computed from the sizes")
        entry, symbolic = _unify_output(kinds, sizes)
        if symbolic:
            sized[k] = entry
    return sized


def _unify_output(values, sizes):
    """``(value, symbolic)``: one output entry for its value in each trace (ints that differ are sizes)."""
    from ..dynamic import NotDynamic

    first = values[0]
    if all(type(v) is int for v in values):
        return (first, False) if len(set(values)) == 1 else (sizes.fit(values), True)
    if isinstance(first, (tuple, list)) and all(type(v) is type(first) and len(v) == len(first) for v in values):
        parts = [_unify_output(items, sizes) for items in zip(*values)]
        items = [p[0] for p in parts]
        rebuilt = type(first)(*items) if hasattr(first, "_fields") else type(first)(items)
        return rebuilt, any(p[1] for p in parts)
    if isinstance(first, dict) and all(isinstance(v, dict) and v.keys() == first.keys() for v in values):
        parts = {key: _unify_output([v[key] for v in values], sizes) for key in first}
        return {key: p[0] for key, p in parts.items()}, any(p[1] for p in parts.values())
    try:
        same = all(v is first or v == first for v in values[1:])
    except Exception:  # noqa: BLE001 - values that do not compare
        same = False
    if not same:
        raise NotDynamic("an output is a value computed from the sizes")
    return first, False


def aot_module_dynamic(mod, example_inputs, runs, compile_graphs, partition_fn=None, decompositions=None,
                       sizes=None):
    """Compile a captured module once for inputs whose dynamic dims may change size.

    ``mod`` is traced for each list of inputs in ``runs`` (the hint sizes first, then the probe sizes of
    :mod:`ember._inductor.dynamic`; the probes' joint graphs are split as the first was), and each
    graph's traces go to ``compile_graphs(gms, example_inputs_per_run) -> callable`` together.

    Args:
        mod (ember.nn.Module): called as ``mod(*example_inputs)``.
        example_inputs (list): the real example inputs (``runs[0]``).
        runs (list[list]): the inputs of each trace.
        compile_graphs (callable): compiles the traces of one graph (forward, backward or inference).
        partition_fn, decompositions: as in :func:`aot_function`.
        sizes (object or None): ``fit(values) -> SymPy expression`` for an int output that differs
            across the traces (a size), and ``env(args) -> {symbol: int}``; None: such outputs are refused.

    Returns:
        callable: ``forward(*args)``; its ``grad_enabled`` and ``training`` attributes say which modes it
        was compiled for (the caller compiles again for others).

    Raises:
        NotDynamic: the traces differ where they must not (an output that is a view of an input, or a
        value other than an int size that depends on the sizes).
    """

    _names, call = _lifted_call(mod)
    refs = _state_refs(mod)
    state = [store[key] for store, key in refs]
    from ..dynamic import REQUIRED_RUNS

    traced = []
    for k, inputs in enumerate(runs):
        flat, spec = tree_flatten(((*state, *inputs), {}))
        like = traced[0][2] if k and traced[0][3] is not None else None
        try:
            traced.append(_trace_graphs(call, flat, spec, partition_fn, decompositions, like=like))
        except Exception:
            if k < REQUIRED_RUNS:
                raise
            break  # the low probe does not trace (a view of size 2): checked from the hint up
    positions, info, fw_gm, bw_gm = traced[0]
    sized = _sized_outputs([t[1] for t in traced], sizes)
    forward = compile_graphs([t[2] for t in traced], [_example_inputs(t[2]) for t in traced])
    if bw_gm is None:
        compiled = _Compiled(info, forward)
    else:
        backward = compile_graphs([t[3] for t in traced], [_example_inputs(t[3]) for t in traced])
        num_saved = len(_as_tuple(list(fw_gm.graph.nodes)[-1].args[0])) - info.num_fwd_outputs
        compiled = _Compiled(info, forward, backward, num_saved)
    modules = list(mod.modules())

    from ..dynamic import _resolve

    outputs = list(info.outputs)
    by_sizes = {}  # symbol values -> the outputs with their sizes resolved

    def run(*args):
        if sized:  # ints returned by the graph that are sizes (a size live across a graph break)
            env = sizes.env(args)
            key = tuple(env.values())
            if key not in by_sizes:
                by_sizes[key] = [_resolve(sized[k], env) if k in sized else out for k, out in enumerate(outputs)]
            info.outputs = by_sizes[key]
        flat = [*[store[key] for store, key in refs], *args]
        return compiled([flat[i] for i in positions])

    run.grad_enabled = ember.is_grad_enabled()
    run.training = tuple(m.training for m in modules)
    run.modules = modules
    return run
