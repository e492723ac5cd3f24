"""The provider registry: which factory opens a source of each ``provider_kind``.

A host never imports an engine's adapter by name. Each adapter distribution registers a
factory under the ``esra.providers`` entry-point group, keyed by the provider kind it opens
(``esra-postgres`` registers ``postgres``, ``esra-sqlite`` registers ``sqlite``, ...), so
installing a distribution is what makes its engine servable from settings. A factory gets
everything a provider may use — the source, its mappings, the tenant's ``SecretStore`` and
outbound ``HostAllowlist``, and the provider options the settings give the source — and
returns the provider with the coroutine that closes it (a pool, a file), so the host closes
every provider the same way, whatever its engine.

Nothing connects when a provider is opened: server providers resolve their connection
template (secrets through the ``SecretStore`` with the source's tenant, the host through the
allowlist) on first use, so a source that is down degrades searches instead of stopping the
host.

A factory may also state which identifiers its engine cannot hold (``CheckedProviderFactory``,
or any factory with an ``identifier_problem`` method): publication refuses a snapshot whose
mappings name one (``identifier_checks``), and ``open`` refuses to open such a source, for a
snapshot that reached the host without being published (the settings file of
``esra serve --config``, or one published before the check existed).
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Awaitable, Callable, Iterable
from collections.abc import Mapping as AbstractMapping
from pathlib import Path
from typing import Protocol, TypeVar, cast

import attrs

from esra.core._config.mapping import Mapping
from esra.core._config.source import Source
from esra.core._entry_point_factories import describe_factory, installed_kinds, load_factories
from esra.core._identifier_checks import IdentifierCheck, refuse_unholdable_identifiers
from esra.core.exceptions import ConfigurationError
from esra.core.ports import HostAllowlist, SearchProvider, SecretStore

__all__ = [
    "PROVIDER_ENTRY_POINT_GROUP",
    "CheckedProviderFactory",
    "DuplicateProviderKindError",
    "OpenedProvider",
    "ProviderFactory",
    "ProviderOptionError",
    "ProviderRegistry",
    "ProviderRequest",
    "UnknownProviderKindError",
    "close_synchronously",
    "identifier_check_of",
    "installed_identifier_checks",
    "installed_provider_kinds",
    "option_value",
]

PROVIDER_ENTRY_POINT_GROUP = "esra.providers"
_T = TypeVar("_T")


class UnknownProviderKindError(ConfigurationError):
    """No installed distribution opens sources of this ``provider_kind``."""

    public_message = "No installed provider opens sources of this kind."

    def __init__(self, kind: str, installed: Iterable[str]) -> None:
        self.kind = kind
        self.installed = tuple(sorted(installed))
        shown = ", ".join(self.installed) or "none"
        super().__init__(
            f"no installed provider opens sources of kind {kind!r} (installed kinds: {shown}); "
            "install the adapter distribution that registers it"
        )


class DuplicateProviderKindError(ConfigurationError):
    """Two factories claim the same ``provider_kind``: which one opens it would be a guess."""

    public_message = "Two providers are registered for the same kind."

    def __init__(self, kind: str, first: str, second: str) -> None:
        self.kind = kind
        super().__init__(
            f"provider kind {kind!r} is registered twice ({first} and {second}); uninstall "
            "one of the distributions"
        )


class ProviderOptionError(ConfigurationError):
    """A source's provider options name an unknown option or give an unusable value."""

    public_message = "A provider option is invalid."


@attrs.frozen
class ProviderRequest:
    """Everything a factory may use to open one source's provider.

    Attributes:
        source: the source; its ``connection_ref`` is the connection template (server
            engines) or the database file's name inside ``databases`` (SQLite).
        mappings: the source's mappings, for the provider's ``health()`` checks.
        secrets: resolves ``${secret:…}`` references, always with the source's tenant.
        allowlist: the outbound hosts the source's tenant may connect to.
        databases: the directory file-based engines resolve ``connection_ref`` in.
        options: the provider options the settings give this source (``pool_size``, ...);
            a factory refuses one it does not know.
    """

    source: Source
    secrets: SecretStore = attrs.field(repr=False)
    allowlist: HostAllowlist = attrs.field(repr=False)
    mappings: tuple[Mapping, ...] = ()
    databases: Path | None = None
    options: AbstractMapping[str, object] = attrs.field(factory=dict)

    @property
    def tenant_id(self) -> str:
        """The source's tenant: the one secrets and the allowlist are consulted with."""
        return self.source.tenant_id

    def refuse_unknown_options(self, known: Iterable[str]) -> None:
        """Raise when ``options`` holds a key outside ``known``.

        Raises:
            ProviderOptionError: naming the first unknown option and the known ones.
        """
        allowed = frozenset(known)
        unknown = sorted(set(self.options) - allowed)
        if unknown:
            shown = ", ".join(sorted(allowed)) or "none"
            msg = (
                f"source {self.source.id!r}: {unknown[0]!r} is not an option of provider kind "
                f"{self.source.provider_kind!r} (its options: {shown})"
            )
            raise ProviderOptionError(msg)

    def database_file(self) -> Path:
        """The file a file-based engine opens: ``connection_ref`` inside ``databases``.

        Raises:
            ProviderOptionError: no ``databases`` directory was given, or the reference
                leaves it.
        """
        if self.databases is None:
            msg = f"source {self.source.id!r}: no databases directory for a file-based provider"
            raise ProviderOptionError(msg)
        root = self.databases.resolve()
        path = (root / self.source.connection_ref).resolve()
        if not path.is_relative_to(root):
            msg = f"source {self.source.id!r}: its database file lies outside {root}"
            raise ProviderOptionError(msg)
        return path


def option_value(request: ProviderRequest, name: str, kind: type[_T], default: _T) -> _T:
    """The option ``name`` of ``request`` as a ``kind``, or ``default`` when absent.

    Booleans are never taken for integers, and an integer is accepted where a float is asked.

    Raises:
        ProviderOptionError: the value has another type, or is a non-positive number.
    """
    value = request.options.get(name)
    if value is None:
        return default
    accepted: tuple[type, ...] = (int, float) if kind is float else (kind,)
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, accepted):
        msg = f"source {request.source.id!r}: option {name!r} must be a {kind.__name__}"
        raise ProviderOptionError(msg)
    if isinstance(value, int | float) and not isinstance(value, bool) and value <= 0:
        msg = f"source {request.source.id!r}: option {name!r} must be positive"
        raise ProviderOptionError(msg)
    return kind(value) if kind is float else value  # type: ignore[call-arg,return-value]


@attrs.frozen
class OpenedProvider:
    """A provider and the coroutine function that releases what it holds."""

    provider: SearchProvider
    close: Callable[[], Awaitable[None]] = attrs.field(repr=False)


def close_synchronously(close: Callable[[], object]) -> Callable[[], Awaitable[None]]:
    """Wrap a provider's synchronous ``close`` (SQLite's) as the coroutine the host awaits."""

    async def closing() -> None:
        close()

    return closing


class ProviderFactory(Protocol):
    """**Protocol:** opens the provider of one source; nothing connects yet."""

    def __call__(self, request: ProviderRequest) -> OpenedProvider:
        """Build the provider ``request`` describes.

        Raises:
            ProviderOptionError: an option is unknown or unusable.
        """
        ...


@attrs.frozen
class CheckedProviderFactory:
    """A provider factory that also states which identifiers its engine cannot hold.

    Publication asks ``identifier_problem`` about every physical name of every mapping of a
    source of the factory's kind (``esra.core._identifier_checks``) and refuses the snapshot
    when it names a reason; ``ProviderRegistry.open`` asks too, before opening.

    Attributes:
        factory: opens the provider.
        identifier_problem: why the engine cannot hold one identifier - without repeating
            it, since the reason reaches error responses - or ``None`` when it can.
    """

    factory: ProviderFactory
    identifier_problem: IdentifierCheck

    def __call__(self, request: ProviderRequest) -> OpenedProvider:
        """Open the provider with ``factory``."""
        return self.factory(request)


def identifier_check_of(factory: object) -> IdentifierCheck | None:
    """The ``identifier_problem`` a factory states, or ``None`` when it states none."""
    check = getattr(factory, "identifier_problem", None)
    return cast("IdentifierCheck", check) if callable(check) else None


class ProviderRegistry:
    """Maps each ``provider_kind`` to its factory; each kind has exactly one.

    Args:
        factories: the kinds registered up front (``from_entry_points`` fills it from the
            installed distributions).
    """

    def __init__(self, factories: AbstractMapping[str, ProviderFactory] | None = None) -> None:
        self._factories: dict[str, ProviderFactory] = {}
        for kind, factory in (factories or {}).items():
            self.register(kind, factory)

    @classmethod
    def from_entry_points(
        cls,
        group: str = PROVIDER_ENTRY_POINT_GROUP,
        *,
        entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
    ) -> ProviderRegistry:
        """The registry of every factory the installed distributions register in ``group``.

        An entry point's name is the provider kind, its value the factory
        (``esra.postgres._factory:open_postgres_provider``). The same name pointing at the
        same object twice (a distribution whose metadata is found on two paths) is one
        registration; two different objects for one name are refused.

        Args:
            group: the entry-point group.
            entry_points: the entry points to read instead of the installed ones (tests).

        Raises:
            DuplicateProviderKindError: two different factories claim one kind.
            ProviderOptionError: an entry point does not load to a callable.
        """
        registry = cls()
        for kind, factory in load_factories(
            group,
            what="provider factory",
            duplicate=DuplicateProviderKindError,
            invalid=ProviderOptionError,
            entry_points=entry_points,
        ):
            registry.register(kind, cast("ProviderFactory", factory))  # loaded callable
        return registry

    @property
    def kinds(self) -> frozenset[str]:
        """The provider kinds this registry opens."""
        return frozenset(self._factories)

    def register(self, kind: str, factory: ProviderFactory) -> None:
        """Add ``factory`` for ``kind``.

        Raises:
            DuplicateProviderKindError: ``kind`` already has a factory.
            ProviderOptionError: ``kind`` is empty.
        """
        if not isinstance(kind, str) or not kind.strip():
            msg = "a provider kind is a non-empty string"
            raise ProviderOptionError(msg)
        existing = self._factories.get(kind)
        if existing is not None:
            raise DuplicateProviderKindError(
                kind, describe_factory(existing), describe_factory(factory)
            )
        self._factories[kind] = factory

    def identifier_checks(self) -> dict[str, IdentifierCheck]:
        """Per kind whose factory states one, which identifiers its engine cannot hold."""
        checks: dict[str, IdentifierCheck] = {}
        for kind, factory in self._factories.items():
            check = identifier_check_of(factory)
            if check is not None:
                checks[kind] = check
        return checks

    def require(self, kind: str) -> None:
        """Check that ``kind`` can be opened, before anything is opened.

        Raises:
            UnknownProviderKindError: no factory is registered for ``kind``.
        """
        if kind not in self._factories:
            raise UnknownProviderKindError(kind, self._factories)

    def open(self, request: ProviderRequest) -> OpenedProvider:
        """Open the provider of ``request.source`` with its kind's factory.

        Raises:
            UnknownProviderKindError: no factory is registered for the source's kind.
            UnholdableIdentifierError: a mapping names an identifier the kind's factory says
                its engine cannot hold.
            ProviderOptionError: the factory refused the source's options.
        """
        kind = request.source.provider_kind
        self.require(kind)
        check = identifier_check_of(self._factories[kind])
        if check is not None:
            refuse_unholdable_identifiers(request.source, request.mappings, check)
        # A third-party factory is checked at run time too: it is only as typed as its author.
        opened: object = self._factories[kind](request)
        if not isinstance(opened, OpenedProvider):
            msg = f"the factory for provider kind {kind!r} did not return an OpenedProvider"
            raise ProviderOptionError(msg)
        return opened

    def __repr__(self) -> str:
        return f"ProviderRegistry(kinds={sorted(self._factories)!r})"


@functools.cache
def installed_identifier_checks(
    group: str = PROVIDER_ENTRY_POINT_GROUP,
) -> AbstractMapping[str, IdentifierCheck]:
    """Per installed kind whose factory states one, which identifiers its engine cannot hold.

    What publication asks when it is given no checks: loading the group imports every
    installed adapter's factory module, once per process.

    Raises:
        DuplicateProviderKindError: two different factories claim one kind.
        ProviderOptionError: an entry point does not load to a callable.
    """
    return ProviderRegistry.from_entry_points(group).identifier_checks()


def installed_provider_kinds(group: str = PROVIDER_ENTRY_POINT_GROUP) -> frozenset[str]:
    """The kinds the installed distributions register in ``group``, without importing them."""
    return installed_kinds(group)
