"""OpInfos of ember._ops.reductions."""

from __future__ import annotations
