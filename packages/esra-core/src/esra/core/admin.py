"""Administration: roles and grants, and the triple-control chain over tenant configuration."""

from esra.core._admin.audit_outbox import (
    DEFAULT_AUDIT_FORWARD_S,
    AuditOutbox,
    AuditOutboxForwarder,
    forward_audit_outbox,
)
from esra.core._admin.chain import (
    AccessPolicyService,
    ConnectionSecretService,
    DataModelService,
    ExposureService,
)
from esra.core._admin.explaining import EXPLAIN_ROLE, ExplainRequest, ExplainService
from esra.core._admin.lookups import HostLookups, IssuerLookup, Lookups, LookupService, ModelProfile
from esra.core._admin.memory_store import InMemoryWorkspaceStore
from esra.core._admin.publication import ConfigPublisher, publishable_snapshot
from esra.core._admin.recording import record_admin_action
from esra.core._admin.roles import (
    Administrator,
    Grant,
    GrantError,
    NotPermittedError,
    Role,
    implied_roles,
)
from esra.core._admin.secrets import InMemorySecretVault
from esra.core._admin.store import (
    ConfigChange,
    ConfigConflictError,
    WorkspaceStore,
    adopt,
    check_save,
    workspace_document,
    workspace_from_document,
)
from esra.core._admin.workspace import AdminWorkspace, adopted_workspace
from esra.core._config.access_policy import AccessPolicy
from esra.core.ports import WritableSecretStore

__all__ = [
    "DEFAULT_AUDIT_FORWARD_S",
    "EXPLAIN_ROLE",
    "AccessPolicy",
    "AccessPolicyService",
    "AdminWorkspace",
    "Administrator",
    "AuditOutbox",
    "AuditOutboxForwarder",
    "ConfigChange",
    "ConfigConflictError",
    "ConfigPublisher",
    "ConnectionSecretService",
    "DataModelService",
    "ExplainRequest",
    "ExplainService",
    "ExposureService",
    "Grant",
    "GrantError",
    "HostLookups",
    "InMemorySecretVault",
    "InMemoryWorkspaceStore",
    "IssuerLookup",
    "LookupService",
    "Lookups",
    "ModelProfile",
    "NotPermittedError",
    "Role",
    "WorkspaceStore",
    "WritableSecretStore",
    "adopt",
    "adopted_workspace",
    "check_save",
    "forward_audit_outbox",
    "implied_roles",
    "publishable_snapshot",
    "record_admin_action",
    "workspace_document",
    "workspace_from_document",
]
