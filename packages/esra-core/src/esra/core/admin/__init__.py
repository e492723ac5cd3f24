"""Administration: roles and grants, and the triple-control chain over tenant configuration."""

from esra.core.admin.chain import (
    AccessPolicyService,
    ConnectionSecretService,
    DataModelService,
    ExposureService,
)
from esra.core.admin.memory_store import InMemoryWorkspaceStore
from esra.core.admin.publication import ConfigPublisher, publishable_snapshot
from esra.core.admin.roles import Administrator, Grant, NotPermittedError, Role, implied_roles
from esra.core.admin.secrets import InMemorySecretVault
from esra.core.admin.store import ConfigChange, ConfigConflictError, WorkspaceStore, adopt
from esra.core.admin.workspace import AdminWorkspace, adopted_workspace
from esra.core.config.access_policy import AccessPolicy
from esra.core.ports import WritableSecretStore

__all__ = [
    "AccessPolicy",
    "AccessPolicyService",
    "AdminWorkspace",
    "Administrator",
    "ConfigChange",
    "ConfigConflictError",
    "ConfigPublisher",
    "ConnectionSecretService",
    "DataModelService",
    "ExposureService",
    "Grant",
    "InMemorySecretVault",
    "InMemoryWorkspaceStore",
    "NotPermittedError",
    "Role",
    "WorkspaceStore",
    "WritableSecretStore",
    "adopt",
    "adopted_workspace",
    "implied_roles",
    "publishable_snapshot",
]
