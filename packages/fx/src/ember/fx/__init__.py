"""``ember.fx``: capture a module as a graph, edit it, and turn it back into Python.

The three parts, as in PyTorch's FX:

* **symbolic tracing** (:func:`symbolic_trace`, :class:`Tracer`, :class:`Proxy`)
  runs ``forward`` on proxies and records what it does;
* the **IR** (:class:`Graph`, :class:`Node`) is a list of operations that can be
  printed, checked and edited;
* **code generation** (:class:`GraphModule`) turns a graph back into a module whose
  ``forward`` is readable Python.

Example:
    >>> import ember
    >>> from ember import fx
    >>> class M(ember.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.linear = ember.nn.Linear(4, 3)
    ...     def forward(self, x):
    ...         return ember.relu(self.linear(x)) + 1
    >>> gm = fx.symbolic_trace(M())
    >>> print(gm.code.strip())
    def forward(self, x):
        linear = self.linear(x)
        relu = ember.relu(linear)
        add = relu + 1
        return add
"""

from . import _serialize, experimental, passes, subgraph_rewriter  # noqa: F401 - ember.fx.experimental as in torch.fx
from ._symbolic_trace import PH, Tracer, symbolic_trace, wrap
from .graph import Graph, PythonCode
from .graph_module import GraphModule
from .interpreter import Interpreter, Transformer
from .node import Node, map_arg
from .proxy import Attribute, Proxy, TraceError

_serialize.register()  # ember.save / ember.load of GraphModules (as data, no pickle)

__all__ = [
    "symbolic_trace",
    "Tracer",
    "wrap",
    "PH",
    "Graph",
    "GraphModule",
    "PythonCode",
    "Interpreter",
    "Transformer",
    "Node",
    "Proxy",
    "Attribute",
    "TraceError",
    "map_arg",
    "replace_pattern",
]


def __getattr__(name):
    if name == "replace_pattern":
        return subgraph_rewriter.replace_pattern
    raise AttributeError(f"module 'ember.fx' has no attribute {name!r}")
