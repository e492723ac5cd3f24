"""What every remote model client is besides its wire format: an owner of one HTTP client.

``OpenAIChatModel`` and ``AnthropicMessagesModel`` post through a ``JsonPoster``; closing the
model closes that client (unless the host passed its own), directly or as an async context
manager. A host closes any remote model it built by this one type.
"""

from __future__ import annotations

from typing import Self

from esra.llm._http import JsonPoster

__all__ = ["RemoteModelClient"]


class RemoteModelClient:
    """Base of the HTTP model clients: ``aclose`` and ``async with`` over their poster."""

    _poster: JsonPoster

    async def aclose(self) -> None:
        """Close the HTTP client (unless the host passed its own)."""
        await self._poster.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()
