"""Derivatives of the nn_conv ops."""

from __future__ import annotations
