"""``ember.onnx.export``: capture (:mod:`._capture`), emit (:mod:`._emit`), check and write."""

from __future__ import annotations

import enum
import inspect
import os
import tempfile

__all__ = ["export", "is_in_onnx_export", "TrainingMode", "DEFAULT_OPSET", "MIN_OPSET"]

_exporting = 0  # how many exports are running (model code may branch on is_in_onnx_export)


def is_in_onnx_export():
    """Whether :func:`export` is tracing the model right now (as ``torch.onnx.is_in_onnx_export``).

    Model code can branch on it to take an export-friendly path.
    """
    return _exporting > 0


#: The opset ``export`` writes when ``opset_version`` is None.
DEFAULT_OPSET = 17
#: The oldest opset the rules support (LayerNormalization needs 17).
MIN_OPSET = 17


class TrainingMode(enum.IntEnum):
    """Which mode the model is exported in (as ``torch.onnx.TrainingMode``).

    ``EVAL``: call ``model.eval()`` for the export and restore the mode after (dropout
    off, batch norm with running statistics). ``PRESERVE``: export the mode it is in.
    ``TRAINING``: call ``model.train()`` for the export.
    """

    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


def _require_onnx():
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise ImportError(
            "ember.onnx.export needs the onnx package: pip install onnx "
            "(or pip install 'ember-fx[onnx]', which also installs onnxruntime to run the file)"
        ) from None


def _max_opset():
    import onnx

    return onnx.defs.onnx_opset_version()


def _check_opset(opset_version):
    if opset_version is None:
        return DEFAULT_OPSET
    if isinstance(opset_version, bool) or not isinstance(opset_version, int):
        raise TypeError(f"opset_version must be an int or None, got {opset_version!r}")
    top = _max_opset()
    if not MIN_OPSET <= opset_version <= top:
        raise ValueError(
            f"opset_version must be between {MIN_OPSET} and {top} (the installed onnx package's newest), "
            f"got {opset_version}"
        )
    return opset_version


def _normalize_args(args, kwargs):
    """PyTorch's conventions: a lone tensor is one argument; a trailing dict in ``args`` holds keyword arguments."""
    import ember

    if isinstance(args, ember.Tensor):
        args = (args,)
    elif isinstance(args, list):
        args = tuple(args)
    elif not isinstance(args, tuple):
        raise TypeError(f"args must be a tensor or a tuple of arguments, got {type(args).__name__}")
    kwargs = dict(kwargs or {})
    if args and isinstance(args[-1], dict) and not kwargs:
        args, kwargs = args[:-1], dict(args[-1])
    return args, kwargs


def _default_input_names(model, args, kwargs, count):
    """The forward's parameter names for the tensor inputs when they map one to one, else ``input_<i>``."""
    import ember

    try:
        params = list(inspect.signature(model.forward if hasattr(model, "forward") else model).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for i, a in enumerate(args):
        if not isinstance(a, ember.Tensor):
            return [f"input_{i}" for i in range(count)]
        names.append(params[i] if i < len(params) and params[i] not in ("args", "kwargs") else f"input_{i}")
    for key, value in kwargs.items():
        if not isinstance(value, ember.Tensor):
            return [f"input_{i}" for i in range(count)]
        names.append(key)
    return names if len(names) == count and len(set(names)) == count else [f"input_{i}" for i in range(count)]


def _check_names(kind, names, count):
    if names is None:
        return None
    names = list(names)
    if any(not isinstance(n, str) for n in names):
        raise TypeError(f"{kind} must be a list of str, got {names!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"{kind} has repeated names: {names!r}")
    if count is not None and len(names) > count:
        raise ValueError(f"{kind} has {len(names)} names but the model has {count}")
    return names


def _write(model_proto, f):
    """Write the serialised model to ``f`` (path or binary file); a path is replaced atomically."""
    if model_proto.ByteSize() >= 2**31:
        raise ValueError(
            "ember.onnx.export: the model is 2 GiB or larger, the limit of one ONNX file; "
            "external-data export is not supported yet"
        )
    data = model_proto.SerializeToString()
    if hasattr(f, "write"):
        f.write(data)
        return
    path = os.fspath(f)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".ember-onnx-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def export(
    model,
    args=(),
    f=None,
    *,
    kwargs=None,
    export_params=True,
    verbose=False,
    training=TrainingMode.EVAL,
    input_names=None,
    output_names=None,
    opset_version=None,
    do_constant_folding=True,
    dynamic_axes=None,
    keep_initializers_as_inputs=False,
    dynamo=False,
    external_data=True,
    dynamic_shapes=None,
    custom_opsets=None,
    export_modules_as_functions=False,
    check_model=True,
    **unsupported,
):
    """Export ``model`` to an ONNX file, as ``torch.onnx.export`` does.

    The model is captured with ember.fx's op-level tracer (``make_fx``'s machinery: one
    node per registry op the call runs, Python control flow taken on the example
    inputs), then each op is written as ONNX nodes by its rule. Python loops run at
    trace time, so recurrent layers (``nn.LSTM``, ``nn.GRU``, ``nn.RNN``) are unrolled
    over the example's sequence length: that axis must stay static (a dynamic one is
    an error), while their batch axis may be dynamic.

    Args:
        model (ember.nn.Module or callable): the model.
        args (Tensor or tuple): example inputs; a trailing dict holds keyword arguments.
            Tensors inside tuples, lists and dicts become graph inputs (in flattening
            order); other values are fixed in the graph.
        f (str, os.PathLike, binary file object or None): where to write the model. A
            path is written atomically (a temporary file in the same folder, then
            renamed). None writes nothing.
        kwargs (dict or None): example keyword arguments.
        export_params (bool): store parameters and buffers in the file (initializers).
            False makes them extra graph inputs, after the model's.
        verbose (bool): print the exported graph.
        training (TrainingMode): the mode to export in (default ``EVAL``).
        input_names (list[str] or None): names of the graph inputs; default the forward's
            parameter names (``input_<i>`` when those don't map one to one).
        output_names (list[str] or None): names of the graph outputs; default ``output``
            for one output, else ``output_<i>``.
        opset_version (int or None): the ONNX opset, 17 (default) up to the installed
            onnx package's newest. From 18 reductions take axes as inputs; from 20
            GELU is one ``Gelu`` node.
        do_constant_folding (bool): accepted for compatibility; constant subgraphs are
            left to the runtime (onnxruntime folds them when it loads the model).
        dynamic_axes (dict or None): ``{name: {axis: axis_name}}`` or
            ``{name: [axis, ...]}`` for inputs and outputs whose axis sizes may change,
            e.g. ``{"x": {0: "batch"}}``. Sizes the model computes from a dynamic axis
            (``reshape``, ``expand``, ``arange``, slicing...) are emitted as functions of
            the runtime shape: the exporter traces the model again with those axes
            resized to find them.
        keep_initializers_as_inputs (bool): also list the initializers as graph inputs
            (so a runtime may override them).
        dynamo (bool): must be False (ember has one exporter).
        external_data (bool): accepted for compatibility; models are written in one file
            (up to ONNX's 2 GiB limit).
        dynamic_shapes: PyTorch's dynamo-exporter argument; must be None (use ``dynamic_axes``).
        custom_opsets (dict or None): must be empty: every node is in the default domain.
        export_modules_as_functions (bool): must be False.
        check_model (bool): run ``onnx.checker.check_model`` on the result.

    Returns:
        onnx.ModelProto: the exported model (also written to ``f``).

    Raises:
        ImportError: when the ``onnx`` package is missing (``pip install onnx``).
        UnsupportedOperatorError: for an op without an ONNX rule, naming the op, the graph
            node and the line of the model that made it.
        CaptureError: when the graph cannot be valid for every size of a dynamic axis.
        TypeError, ValueError: for bad arguments (names, axes, opset).

    Example:
        >>> import io, ember
        >>> model = ember.nn.Sequential(ember.nn.Linear(4, 2), ember.nn.ReLU())
        >>> proto = ember.onnx.export(model, ember.randn(3, 4), io.BytesIO(),
        ...                           input_names=["x"], dynamic_axes={"x": {0: "batch"}})
        >>> [n.op_type for n in proto.graph.node]
        ['Gemm', 'Relu', 'Identity']
    """
    _require_onnx()
    if unsupported:
        raise TypeError(
            f"ember.onnx.export got arguments it does not support: {sorted(unsupported)} "
            "(they belong to PyTorch exporters ember does not have)"
        )
    if dynamic_shapes is not None:
        raise ValueError("ember.onnx.export: dynamic_shapes is the dynamo exporter's; use dynamic_axes")
    if custom_opsets:
        raise ValueError(f"ember.onnx.export: custom_opsets are not supported (got {custom_opsets!r})")
    if export_modules_as_functions:
        raise ValueError("ember.onnx.export: export_modules_as_functions=True is not supported")
    if dynamo:
        raise ValueError("ember.onnx.export: dynamo=True is not supported; ember has one exporter (dynamo=False)")
    if not isinstance(training, TrainingMode):
        raise TypeError(f"training must be an ember.onnx.TrainingMode, got {training!r}")
    opset = _check_opset(opset_version)
    args, kwargs = _normalize_args(args, kwargs)
    if dynamic_axes is not None and not isinstance(dynamic_axes, dict):
        raise TypeError(f"dynamic_axes must be a dict, got {type(dynamic_axes).__name__}")

    from ._capture import _flat_call, capture
    from ._emit import emit
    from ._rules import decompositions

    count = len(_flat_call(model, args, kwargs)[1])
    input_names = _check_names("input_names", input_names, count)
    output_names = _check_names("output_names", output_names, None)
    names = list(input_names or [])
    if len(names) < count:
        defaults = _default_input_names(model, args, kwargs, count)
        names += [n if n not in names else f"input_{i}" for i, n in enumerate(defaults[len(names) :], len(names))]

    global _exporting
    was_training = getattr(model, "training", None)
    if was_training is not None and training != TrainingMode.PRESERVE:
        model.train(training == TrainingMode.TRAINING)
    _exporting += 1
    try:
        import ember

        with ember.no_grad():
            captured = capture(
                model, args, kwargs, input_names=names, dynamic_axes=dynamic_axes, decompositions=decompositions()
            )
    finally:
        _exporting -= 1
        if was_training is not None:
            model.train(was_training)

    outputs = len(captured.outputs)
    if output_names is not None and len(output_names) > outputs:
        raise ValueError(f"output_names has {len(output_names)} names but the model has {outputs} outputs")
    given = list(output_names or [])
    defaults = ["output"] if outputs == 1 else [f"output_{j}" for j in range(outputs)]
    output_names = given + [n if n not in given else f"output_{j}" for j, n in enumerate(defaults) if j >= len(given)]
    unknown = set(dynamic_axes or {}) - set(names) - set(output_names)
    if unknown:
        raise ValueError(f"dynamic_axes names {sorted(unknown)} are neither inputs {names} nor outputs {output_names}")

    proto = emit(
        captured,
        opset=opset,
        output_names=output_names,
        dynamic_axes=dynamic_axes,
        export_params=export_params,
        model_doc=f"Exported by ember.onnx from {type(model).__name__}",
    )
    if keep_initializers_as_inputs:
        _initializers_as_inputs(proto)
    if check_model:
        import onnx

        onnx.checker.check_model(proto)
    if verbose:
        import onnx

        print(onnx.printer.to_text(proto.graph))
    if f is not None:
        _write(proto, f)
    return proto


def _initializers_as_inputs(proto):
    from onnx import helper

    listed = {i.name for i in proto.graph.input}
    for init in proto.graph.initializer:
        if init.name not in listed:
            proto.graph.input.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
