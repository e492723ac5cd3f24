"""The ``documents`` extra: the readers document extraction needs, checked at start-up.

``esra-core`` installs without pypdf and python-docx; the internal document store cannot
extract PDF or DOCX without them. A host that serves or indexes a store checks once, when
it starts, and refuses with the install command — rather than failing (or, as it once did,
leaking a sandbox process) on the first PDF a worker picks up.
"""

from __future__ import annotations

import importlib.util

from esra.core.exceptions import ConfigurationError

__all__ = ["DOCUMENT_READERS", "INSTALL_HINT", "MissingExtraError", "require_document_extra"]

# Importable name -> distribution, for the message.
DOCUMENT_READERS: dict[str, str] = {"pypdf": "pypdf", "docx": "python-docx"}
INSTALL_HINT = "pip install 'esra-core[documents]'"


class MissingExtraError(ConfigurationError):
    """An optional dependency the configuration needs is not installed."""

    def __init__(self, missing: tuple[str, ...]) -> None:
        self.missing = missing
        super().__init__(
            f"The internal document store needs {', '.join(missing)} (the 'documents' extra "
            f"of esra-core), which is not installed. Install it with: {INSTALL_HINT}"
        )


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require_document_extra() -> None:
    """Raise unless every reader of the ``documents`` extra can be imported.

    Looks the modules up without importing them: the parent never needs pypdf or python-docx
    (only the extraction sandbox does), and importing them would cost every host their memory.

    Raises:
        MissingExtraError: naming the missing distributions and the install command.
    """
    missing = tuple(dist for module, dist in DOCUMENT_READERS.items() if not _importable(module))
    if missing:
        raise MissingExtraError(missing)
