"""The document-store registry: which factory opens a tenant's internal store of each kind.

A tenant's internal document store is a source of its configuration whose ``provider_kind``
is a *store kind*. The host never imports an engine's store by name: each adapter
distribution registers a factory under the ``esra.document_stores`` entry-point group, keyed
by the store kind it opens (``esra-sqlite`` registers ``sqlite-document-store``,
``esra-postgres`` registers ``postgres-document-store``), exactly as providers are registered
under ``esra.providers`` (:mod:`esra.core._provider_registry`). The same kind is registered in
both groups: the store registry opens what ingestion writes to, the provider registry what
searches read.

A factory gets a :class:`StoreRequest` — the store's source, the tenant's ``SecretStore`` and
outbound ``HostAllowlist``, the tenant's databases directory and the source's options from
the settings, and where initialisation is recorded — and returns an :class:`OpenedStore`: the
``DocumentRepository``, the ``initialise()`` an administrator starts (the engine's schema,
idempotently, with its own checks), the ``schema_present()`` readiness check and ``close()``.
Opening connects to nothing: a store whose server is down is reported by
``schema_present()`` (False) and by its repository's errors, never by ``open``.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Awaitable, Callable, Iterable
from collections.abc import Mapping as AbstractMapping
from pathlib import Path
from typing import Protocol, cast

import attrs

from esra.core._docstore.repository import DocumentRepository
from esra.core._entry_point_factories import describe_factory, installed_kinds, load_factories
from esra.core._provider_registry import ProviderOptionError, ProviderRequest
from esra.core.exceptions import ConfigurationError
from esra.core.ports import AuditSink, Clock

__all__ = [
    "DOCUMENT_STORE_ENTRY_POINT_GROUP",
    "DocumentStoreFactory",
    "DocumentStoreRegistry",
    "DuplicateStoreKindError",
    "OpenedStore",
    "StoreRequest",
    "UnknownStoreKindError",
    "installed_store_kinds",
]

DOCUMENT_STORE_ENTRY_POINT_GROUP = "esra.document_stores"


class UnknownStoreKindError(ConfigurationError):
    """No installed distribution opens document stores of this kind."""

    public_message = "No installed document store opens stores of this kind."

    def __init__(self, kind: str, installed: Iterable[str]) -> None:
        self.kind = kind
        self.installed = tuple(sorted(installed))
        shown = ", ".join(self.installed) or "none"
        super().__init__(
            f"no installed document store opens stores of kind {kind!r} (installed store "
            f"kinds: {shown}); install the adapter distribution that registers it"
        )


class DuplicateStoreKindError(ConfigurationError):
    """Two factories claim the same store kind: which one opens it would be a guess."""

    public_message = "Two document stores are registered for the same kind."

    def __init__(self, kind: str, first: str, second: str) -> None:
        self.kind = kind
        super().__init__(
            f"document-store kind {kind!r} is registered twice ({first} and {second}); "
            "uninstall one of the distributions"
        )


@attrs.frozen
class StoreRequest(ProviderRequest):
    """Everything a factory may use to open one tenant's store: a provider request (the
    store's source, secrets, allowlist, databases directory, options) plus where the
    store's own initialisation steps are recorded.

    Attributes:
        audit: where an engine that audits its initialisation records it (``None``: the
            factory's default, the ``esra.audit`` logger). The lifecycle that starts the
            initialisation audits the operator's action itself.
        clock: time for those records (``None``: the system clock).
    """

    audit: AuditSink | None = attrs.field(default=None, repr=False)
    clock: Clock | None = attrs.field(default=None, repr=False)


@attrs.frozen
class OpenedStore:
    """One opened store: its repository, its lifecycle hooks, and what releases it.

    Attributes:
        repository: the store's documents and work queue.
        initialise: creates the store's schema, idempotently, after the engine's checks;
            raises ``esra.core._docstore.lifecycle.StoreInitialisationError`` with a
            classified reason and a remedy (never driver text).
        schema_present: whether the store's schema is there (the store is Ready); False,
            never an exception, when the database cannot be reached.
        close: releases what the store holds (a connection, a pool).
        location: where the store lives, for logs and messages, never holding a secret: a
            file-based store's file, a server store's host, database and schema. Stores
            with one location are one database (tenants sharing it share one worker).
        errors: the exception types meaning the store's database failed while in use.
    """

    repository: DocumentRepository
    initialise: Callable[[], Awaitable[None]] = attrs.field(repr=False)
    schema_present: Callable[[], Awaitable[bool]] = attrs.field(repr=False)
    close: Callable[[], Awaitable[None]] = attrs.field(repr=False)
    location: Path | str
    errors: tuple[type[BaseException], ...] = ()


class DocumentStoreFactory(Protocol):
    """**Protocol:** opens one tenant's store; connects to nothing yet."""

    def __call__(self, request: StoreRequest) -> Awaitable[OpenedStore]:
        """Open the store ``request`` describes.

        Raises:
            ProviderOptionError: an option is unknown or unusable.
        """
        ...


class DocumentStoreRegistry:
    """Maps each store kind to its factory; each kind has exactly one.

    Args:
        factories: the kinds registered up front (``from_entry_points`` fills it from the
            installed distributions).
    """

    def __init__(self, factories: AbstractMapping[str, DocumentStoreFactory] | None = None) -> None:
        self._factories: dict[str, DocumentStoreFactory] = {}
        for kind, factory in (factories or {}).items():
            self.register(kind, factory)

    @classmethod
    def from_entry_points(
        cls,
        group: str = DOCUMENT_STORE_ENTRY_POINT_GROUP,
        *,
        entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
    ) -> DocumentStoreRegistry:
        """The registry of every factory the installed distributions register in ``group``.

        An entry point's name is the store kind, its value the factory. The same name
        pointing at the same object twice is one registration; two different ones are refused.

        Raises:
            DuplicateStoreKindError: two different factories claim one kind.
            ProviderOptionError: an entry point does not load to a callable.
        """
        registry = cls()
        for kind, factory in load_factories(
            group,
            what="document-store factory",
            duplicate=DuplicateStoreKindError,
            invalid=ProviderOptionError,
            entry_points=entry_points,
        ):
            registry.register(kind, cast("DocumentStoreFactory", factory))  # loaded callable
        return registry

    @property
    def kinds(self) -> frozenset[str]:
        """The store kinds this registry opens."""
        return frozenset(self._factories)

    def register(self, kind: str, factory: DocumentStoreFactory) -> None:
        """Add ``factory`` for ``kind``.

        Raises:
            DuplicateStoreKindError: ``kind`` already has a factory.
            ProviderOptionError: ``kind`` is empty.
        """
        if not isinstance(kind, str) or not kind.strip():
            msg = "a document-store kind is a non-empty string"
            raise ProviderOptionError(msg)
        existing = self._factories.get(kind)
        if existing is not None:
            raise DuplicateStoreKindError(
                kind, describe_factory(existing), describe_factory(factory)
            )
        self._factories[kind] = factory

    def require(self, kind: str) -> None:
        """Check that ``kind`` can be opened, before anything is opened.

        Raises:
            UnknownStoreKindError: no factory is registered for ``kind``.
        """
        if kind not in self._factories:
            raise UnknownStoreKindError(kind, self._factories)

    async def open(self, request: StoreRequest) -> OpenedStore:
        """Open the store of ``request.source`` with its kind's factory.

        Raises:
            UnknownStoreKindError: no factory is registered for the source's kind.
            ProviderOptionError: the factory refused the source's options.
        """
        kind = request.source.provider_kind
        self.require(kind)
        # A third-party factory is checked at run time too: it is only as typed as its author.
        opened: object = await self._factories[kind](request)
        if not isinstance(opened, OpenedStore):
            msg = f"the factory for document-store kind {kind!r} did not return an OpenedStore"
            raise ProviderOptionError(msg)
        return opened

    def __repr__(self) -> str:
        return f"DocumentStoreRegistry(kinds={sorted(self._factories)!r})"


def installed_store_kinds(group: str = DOCUMENT_STORE_ENTRY_POINT_GROUP) -> frozenset[str]:
    """The store kinds the installed distributions register, without importing them."""
    return installed_kinds(group)
