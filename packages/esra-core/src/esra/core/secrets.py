"""Secret storage: envelope-encrypted stored secrets and resolvers for external references.

- :mod:`~esra.core._secrets.keys` — the key-encryption keyring, from a file or a variable;
- :mod:`~esra.core._secrets.envelope` — sealing one value (DEK + AES-GCM, KEK-wrapped);
- :mod:`~esra.core._secrets.table` — the ``SecretTable`` port (bytes only);
- :mod:`~esra.core._secrets.store` — ``EncryptedSecretStore``, rotation and re-wrap;
- :mod:`~esra.core._secrets.references` — ``env:`` and ``file:`` references, per-tenant policy;
- :mod:`~esra.core._secrets.routing` — one store choosing by reference scheme.
"""

from esra.core._secrets.envelope import (
    ENVELOPE_VERSION,
    MAX_SECRET_BYTES,
    EnvelopeOpenError,
    SealedSecret,
)
from esra.core._secrets.keys import KEK_BYTES, KeyEncryptionKeys, KeyringConfigurationError
from esra.core._secrets.references import (
    DENY_ALL,
    ReferencePolicy,
    ReferenceSecretResolver,
    reference_scheme,
)
from esra.core._secrets.routing import ExternalReferenceWriteError, RoutingSecretStore
from esra.core._secrets.store import EncryptedSecretStore, KeyInUseError, RewrapReport
from esra.core._secrets.table import SecretTable

__all__ = [
    "DENY_ALL",
    "ENVELOPE_VERSION",
    "KEK_BYTES",
    "MAX_SECRET_BYTES",
    "EncryptedSecretStore",
    "EnvelopeOpenError",
    "ExternalReferenceWriteError",
    "KeyEncryptionKeys",
    "KeyInUseError",
    "KeyringConfigurationError",
    "ReferencePolicy",
    "ReferenceSecretResolver",
    "RewrapReport",
    "RoutingSecretStore",
    "SealedSecret",
    "SecretTable",
    "reference_scheme",
]
