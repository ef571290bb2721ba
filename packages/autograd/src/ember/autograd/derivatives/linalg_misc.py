"""Derivatives of the composite linalg functions (``ember._ops.linalg_misc``)."""
