"""Server-less checks every synchronous-driver provider (SQL Server, Oracle) must pass.

An engine's ``test_provider`` subclasses ``SyncProviderChecks`` as ``Test...`` and names its
scheme, its text-index kind and its provider factory; the checks need no server: nothing
listens on the local port the factory points at.
"""

from __future__ import annotations

import socket
from typing import Any, ClassVar

import pytest

from esra.core._config.mapping import Operator
from esra.core._config.source import SourceHealth
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import Strategy
from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError, UnvalidatedQueryError
from esra.core.ports import SearchProvider, TextIndexKind
from tests._injection import issue

__all__ = ["SyncProviderChecks"]

_P = ProviderErrorCode


class SyncProviderChecks:
    """Capabilities, the template path before any socket, refusals, a refused connection."""

    scheme: ClassVar[str]
    text_index: ClassVar[TextIndexKind]

    def provider(self, connection: str | None = None, **kwargs: Any) -> Any:
        """The engine's provider over ``connection`` (its default: a closed local port)."""
        raise NotImplementedError

    @pytest.fixture
    def no_sockets(self, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
        """Record any attempt to open a Python-level socket (the template path must open none)."""
        opened: list[Any] = []
        real = socket.socket.connect

        def connect(self: socket.socket, address: Any) -> None:
            opened.append(address)
            real(self, address)

        monkeypatch.setattr(socket.socket, "connect", connect)
        return opened

    def test_is_a_search_provider_with_explicit_capabilities(self) -> None:
        """All six strategies, all seven operators, the engine's text-index kind."""
        p = self.provider()
        assert isinstance(p, SearchProvider)
        assert p.capabilities.strategies == frozenset(Strategy)
        assert p.capabilities.operators == frozenset(Operator)
        assert p.capabilities.text_index is self.text_index

    @pytest.mark.parametrize(
        ("kwargs", "expected"),
        [
            ({"allowed": ()}, _P.HOST_NOT_ALLOWED),
            ({"secrets": {}}, _P.SECRET_UNRESOLVED),
            ({"connection": "postgresql://u@127.0.0.1:1/db"}, _P.CONNECTION_TEMPLATE_INVALID),
            ({"connection": "{scheme}://u@${{secret:h}}:1/db"}, _P.CONNECTION_TEMPLATE_INVALID),
            ({"connection": "{scheme}://u@127.0.0.1:1/db?evil=1"}, _P.CONNECTION_TEMPLATE_INVALID),
            ({"connection": "{scheme}://u@127.0.0.1:1"}, _P.CONNECTION_TEMPLATE_INVALID),
        ],
    )
    async def test_template_failures_happen_before_any_socket(
        self, no_sockets: list[Any], kwargs: dict[str, Any], expected: ProviderErrorCode
    ) -> None:
        """Allowlist, secrets and template errors are raised with no connection attempted."""
        if "connection" in kwargs:
            kwargs = {**kwargs, "connection": kwargs["connection"].format(scheme=self.scheme)}
        p = self.provider(**kwargs)
        with pytest.raises(ProviderError) as raised:
            await p.execute(issue(optional_terms=("solar",)), timeout_s=5)
        assert raised.value.code is expected
        assert no_sockets == []
        assert await p.health() is SourceHealth.UNAVAILABLE
        await p.close()

    async def test_a_refused_connection_is_connection_refused(self) -> None:
        """A real driver connect to a closed port surfaces as CONNECTION_REFUSED, nothing else."""
        p = self.provider()
        try:
            with pytest.raises(ProviderError) as raised:
                await p.execute(issue(optional_terms=("solar",)), timeout_s=5)
            assert raised.value.code is _P.CONNECTION_REFUSED
            assert str(raised.value) == str(ProviderError(_P.CONNECTION_REFUSED))  # no driver text
            assert await p.health() is SourceHealth.UNAVAILABLE
        finally:
            await p.close()

    async def test_refuses_unvalidated_queries(self) -> None:
        """A forged ValidatedQuery is refused before anything else happens."""
        p = self.provider()
        with pytest.raises(UnvalidatedQueryError):
            await p.execute(object.__new__(ValidatedQuery), timeout_s=5)
        await p.close()
