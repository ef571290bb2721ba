"""Composite linalg functions (filled in below)."""

__all__ = []
METHODS: list[str] = []
ALIASES: dict[str, str] = {}
