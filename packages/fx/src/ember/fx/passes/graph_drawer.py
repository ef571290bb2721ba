"""Draw a GraphModule's graph with Graphviz: DOT text always, SVG/PNG where ``dot`` is installed.

Each node is a record box (name, opcode, target, arguments, and the shape/dtype that
:class:`~ember.fx.passes.shape_prop.ShapeProp` recorded, if any), coloured by opcode;
edges go from a value to its users. ``call_module`` boxes also show the module type.

Example:
    >>> import ember
    >>> from ember.fx import symbolic_trace
    >>> from ember.fx.passes.graph_drawer import FxGraphDrawer
    >>> gm = symbolic_trace(ember.nn.Sequential(ember.nn.Linear(2, 2), ember.nn.ReLU()))
    >>> dot = FxGraphDrawer(gm, "seq").get_dot_graph()
    >>> print(dot.to_string().splitlines()[0])
    digraph "seq" {
"""

from __future__ import annotations

import shutil
import subprocess

from .._names import qualified_name

__all__ = ["FxGraphDrawer", "DotGraph"]

_COLORS = {
    "placeholder": "AliceBlue",
    "get_attr": "LemonChiffon1",
    "call_function": "PaleTurquoise",
    "call_method": "Thistle",
    "call_module": "LightGrey",
    "output": "AliceBlue",
}


def _escape(text):
    """Escape a string for a DOT record label."""
    out = str(text)
    for ch in '\\{}<>|"':
        out = out.replace(ch, "\\" + ch)
    return out.replace("\n", "\\n")


class DotGraph:
    """DOT source of a drawing, with rendering through the Graphviz ``dot`` program.

    Args:
        source (str): the DOT text.
    """

    def __init__(self, source):
        self.source = source

    def to_string(self):
        """The DOT text."""
        return self.source

    def create(self, format="svg"):  # noqa: A002 - Graphviz's name
        """Render with ``dot -T<format>`` and return the bytes.

        Raises:
            RuntimeError: if the Graphviz ``dot`` program is not installed.
        """
        exe = shutil.which("dot")
        if exe is None:
            raise RuntimeError(
                "rendering needs the Graphviz 'dot' program, which is not on PATH; "
                "install Graphviz, or use to_string() for the DOT text"
            )
        return subprocess.run([exe, f"-T{format}"], input=self.source.encode(), capture_output=True, check=True).stdout

    def create_svg(self):
        """The drawing as SVG bytes (see :meth:`create`)."""
        return self.create("svg")

    def create_png(self):
        """The drawing as PNG bytes (see :meth:`create`)."""
        return self.create("png")

    def write(self, path, format="raw"):  # noqa: A002 - Graphviz's name
        """Write the DOT text (``format="raw"``) or a rendering to ``path``."""
        data = self.source.encode() if format == "raw" else self.create(format)
        with open(path, "wb") as f:
            f.write(data)


class FxGraphDrawer:
    """Draws the graph of a GraphModule (PyTorch's ``FxGraphDrawer``, producing DOT text).

    Args:
        graph_module (GraphModule): what to draw.
        name (str): the graph's name in the DOT output.
        ignore_getattr (bool): leave out ``get_attr`` nodes.
        ignore_parameters_and_buffers (bool): leave out ``get_attr`` nodes that read
            parameters or buffers.
        skip_node_names_in_args (bool): show ``args`` without node names (edges show them).
    """

    def __init__(
        self,
        graph_module,
        name,
        ignore_getattr=False,
        ignore_parameters_and_buffers=False,
        skip_node_names_in_args=True,
    ):
        self.graph_module = graph_module
        self.name = name
        self.ignore_getattr = ignore_getattr
        self.ignore_parameters_and_buffers = ignore_parameters_and_buffers
        self.skip_node_names_in_args = skip_node_names_in_args

    def _skipped(self, node):
        if node.op != "get_attr":
            return False
        if self.ignore_getattr:
            return True
        if self.ignore_parameters_and_buffers:
            named = dict(self.graph_module.named_parameters()) | dict(self.graph_module.named_buffers())
            return node.target in named
        return False

    def _label(self, node):
        parts = [node.name, f"op_code={node.op}"]
        if node.op == "call_module":
            module = self.graph_module.get_submodule(node.target)
            parts.append(f"target={node.target} ({type(module).__name__})")
        elif node.op != "output":
            parts.append(f"target={qualified_name(node.target)}")
        args = node.args
        if self.skip_node_names_in_args:
            from ..node import map_arg

            args = map_arg(args, lambda n: "_")
        if args:
            parts.append(f"args={args}")
        if node.kwargs:
            parts.append(f"kwargs={dict(node.kwargs)}")
        meta = node.meta.get("tensor_meta")
        if meta is not None and hasattr(meta, "shape"):
            parts.append(f"shape={tuple(meta.shape)}, dtype={meta.dtype}")
        return "{" + "|".join(_escape(p) + "\\l" for p in parts) + "}"

    def get_dot_graph(self, submod_name=None):
        """The drawing of the graph (or of the submodule ``submod_name``, itself a GraphModule)."""
        gm = self.graph_module if submod_name is None else self.graph_module.get_submodule(submod_name)
        drawer = self if submod_name is None else FxGraphDrawer(gm, f"{self.name}_{submod_name}")
        return DotGraph(drawer._source())

    def get_main_dot_graph(self):
        """Same as :meth:`get_dot_graph` without arguments."""
        return self.get_dot_graph()

    def _source(self):
        lines = [f'digraph "{_escape(self.name)}" {{', "    rankdir=TB;", "    node [shape=record];"]
        shown = [n for n in self.graph_module.graph.nodes if not self._skipped(n)]
        for node in shown:
            color = _COLORS.get(node.op, "white")
            lines.append(f'    "{node.name}" [label="{self._label(node)}", style=filled, fillcolor={color}];')
        kept = set(shown)
        for node in shown:
            for user in node.users:
                if user in kept:
                    lines.append(f'    "{node.name}" -> "{user.name}";')
        lines.append("}")
        return "\n".join(lines) + "\n"
