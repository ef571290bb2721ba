"""OpInfos of ember._ops.nn_functional."""

from __future__ import annotations
