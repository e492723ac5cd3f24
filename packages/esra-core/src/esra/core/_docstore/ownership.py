"""Who owns a stored document: an upload (managed by hand) or a sync connector (read-only).

Every document carries an owner. Uploads through the admin API, the Portal or ``esra
ingest`` are ``uploaded``, the default (also for documents stored before owners existed).
A document a sync connector keeps in step with an external system is ``connector``-owned,
named by its connector: the connector is its source of truth, so the store refuses to
delete, re-index or release it by hand (``DocumentReadOnlyError``) and the screens render it
read-only. No connector exists yet; ``DocumentRepository.add(..., owner=...)`` is how one
will store its documents.
"""

from __future__ import annotations

from enum import StrEnum

import attrs

from esra.core._admin.roles import NotPermittedError
from esra.core.codes import ErrorCode

__all__ = [
    "MAX_CONNECTOR_NAME_CHARS",
    "UPLOADED",
    "DocumentOwner",
    "DocumentReadOnlyError",
    "OwnerKind",
]

# A connector's name is display metadata and an audit dimension: short, printable.
MAX_CONNECTOR_NAME_CHARS = 128


class OwnerKind(StrEnum):
    """How a document entered the store."""

    UPLOADED = "uploaded"
    CONNECTOR = "connector"


def _connector_name(
    instance: DocumentOwner, _attribute: attrs.Attribute[str | None], value: str | None
) -> None:
    if instance.kind is OwnerKind.UPLOADED:
        if value is not None:
            msg = "an uploaded document names no connector"
            raise ValueError(msg)
        return
    if (
        value is None
        or not value.strip()
        or len(value) > MAX_CONNECTOR_NAME_CHARS
        or not value.isprintable()
    ):
        msg = (
            "a connector-owned document needs the connector's name: printable text of at "
            f"most {MAX_CONNECTOR_NAME_CHARS} characters"
        )
        raise ValueError(msg)


@attrs.frozen
class DocumentOwner:
    """A document's owner: ``uploaded``, or ``connector`` with the connector's name.

    Raises:
        ValueError: a connector owner without a usable name, or an uploaded one with a name.
    """

    kind: OwnerKind = attrs.field(default=OwnerKind.UPLOADED, converter=OwnerKind)
    connector: str | None = attrs.field(default=None, validator=_connector_name)

    @classmethod
    def by_connector(cls, name: str) -> DocumentOwner:
        """The owner of documents kept in sync by the connector ``name``."""
        return cls(OwnerKind.CONNECTOR, name)

    @property
    def read_only(self) -> bool:
        """Whether changes must come from the owner's source, never from an operator."""
        return self.kind is OwnerKind.CONNECTOR

    @property
    def read_only_reason(self) -> str | None:
        """Why an operator cannot change the document by hand (None when they can)."""
        if not self.read_only:
            return None
        return (
            f"This document is owned by the connector {self.connector!r}, which keeps it in "
            "sync with its source: it is read-only here. Change it in the source system; "
            "deleting, re-indexing or releasing it by hand is not available."
        )


UPLOADED = DocumentOwner()


class DocumentReadOnlyError(NotPermittedError):
    """A management action on a connector-owned document: its connector owns its changes.

    A ``NotPermittedError`` (the action does not apply), with a code of its own so the
    admin API answers 409 ``ESRA_DOCUMENT_READ_ONLY`` and the Portal says why.
    """

    code = ErrorCode.ESRA_DOCUMENT_READ_ONLY
    public_message = "This document is owned by a connector and is read-only here."

    def __init__(self, owner: DocumentOwner) -> None:
        self.owner = owner
        super().__init__(owner.read_only_reason or self.public_message)
