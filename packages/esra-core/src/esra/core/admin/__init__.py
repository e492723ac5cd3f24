"""Administration: roles and grants, and the triple-control chain over tenant configuration."""

from esra.core.admin.chain import (
    AccessPolicyService,
    ConnectionSecretService,
    DataModelService,
    ExposureService,
)
from esra.core.admin.publication import ConfigPublisher, publishable_snapshot
from esra.core.admin.roles import Administrator, Grant, NotPermittedError, Role, implied_roles
from esra.core.admin.secrets import InMemorySecretVault, WritableSecretStore
from esra.core.admin.workspace import AdminWorkspace, WorkspaceRegistry
from esra.core.config.access_policy import AccessPolicy

__all__ = [
    "AccessPolicy",
    "AccessPolicyService",
    "AdminWorkspace",
    "Administrator",
    "ConfigPublisher",
    "ConnectionSecretService",
    "DataModelService",
    "ExposureService",
    "Grant",
    "InMemorySecretVault",
    "NotPermittedError",
    "Role",
    "WorkspaceRegistry",
    "WritableSecretStore",
    "implied_roles",
    "publishable_snapshot",
]
