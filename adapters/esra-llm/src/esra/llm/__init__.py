"""ESRA model clients. ``LocalModel`` answers offline and deterministically."""

from esra.llm.local import LocalModel

__all__ = ["LocalModel"]
