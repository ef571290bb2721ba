"""Export ember models to ONNX (``ember.onnx.export``), shipped with ember-fx.

Export runs in two steps that other exporters can share: **capture** records the
model as an FX graph of registry ops (:func:`ember.onnx._capture.capture`, built on
``ember.fx``'s ``make_fx`` machinery), and **emission** turns each op into ONNX nodes
through a rule table keyed by the op (:mod:`ember.onnx._rules`). The ``onnx``
package is imported only by :func:`export`; install it with ``pip install onnx`` (and
``onnxruntime`` to run the files), or ``pip install 'ember-fx[onnx]'``.
"""

from __future__ import annotations

from ._builder import UnsupportedOperatorError
from ._capture import CaptureError
from ._export import DEFAULT_OPSET, TrainingMode, export, is_in_onnx_export

__all__ = [
    "export",
    "is_in_onnx_export",
    "TrainingMode",
    "UnsupportedOperatorError",
    "CaptureError",
    "supported_ops",
    "DEFAULT_OPSET",
]


def supported_ops():
    """The names of the registry ops :func:`export` can write to ONNX, sorted.

    In-place variants (``relu_``) export through their functional op's rule.
    """
    from ._rules import supported_ops as names

    return names()
