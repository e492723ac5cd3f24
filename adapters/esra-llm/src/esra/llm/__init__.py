"""ESRA model clients: OpenAI-compatible and Anthropic over HTTP, and the offline LocalModel."""

from esra.llm._anthropic import AnthropicMessagesModel
from esra.llm._embedding_cache import DEFAULT_MAX_ENTRIES, EmbeddingCache
from esra.llm._embeddings import Embedder
from esra.llm._local import LocalModel
from esra.llm._loopback import is_loopback_url
from esra.llm._openai import OpenAIChatModel
from esra.llm._remote import RemoteModelClient

__all__ = [
    "DEFAULT_MAX_ENTRIES",
    "AnthropicMessagesModel",
    "Embedder",
    "EmbeddingCache",
    "LocalModel",
    "OpenAIChatModel",
    "RemoteModelClient",
    "is_loopback_url",
]

__version__ = "0.1.0"
