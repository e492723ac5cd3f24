"""ESRA model clients: OpenAI-compatible and Anthropic over HTTP, and the offline LocalModel."""

from esra.llm.anthropic import AnthropicMessagesModel
from esra.llm.embedding_cache import EmbeddingCache
from esra.llm.local import LocalModel
from esra.llm.openai import OpenAIChatModel
from esra.llm.remote import RemoteModelClient

__all__ = [
    "AnthropicMessagesModel",
    "EmbeddingCache",
    "LocalModel",
    "OpenAIChatModel",
    "RemoteModelClient",
]

__version__ = "0.1.0"
