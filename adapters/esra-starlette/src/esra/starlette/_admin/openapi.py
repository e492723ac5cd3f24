"""The admin API's OpenAPI 3.1 document, built from one table of its operations.

The table is the single description of every endpoint (method, path, role, body, answers);
a test checks it against the routes the host really serves, so the document cannot drift
from the API.
"""

from __future__ import annotations

from typing import Any

import attrs

from esra.starlette._admin.operator import MAX_TENANT_CHARS

__all__ = ["OPERATIONS", "Operation", "openapi_document"]


@attrs.frozen
class Operation:
    """One endpoint as the document describes it."""

    method: str
    path: str
    summary: str
    role: str
    ok_status: int = 200
    ok: str = "Workspace"
    body: str | None = None
    errors: tuple[int, ...] = (401, 403)


_STORE_ERRORS = (401, 403, 404)
_DOCUMENT_ERRORS = (401, 403, 404, 409)
# 409: a change naming a stale version (If-Match) is refused, never applied.
_CONFIG_ERRORS = (400, 401, 403, 409, 413, 415, 422)

OPERATIONS: tuple[Operation, ...] = (
    Operation("get", "/store", "The store's lifecycle state (and counts once Ready).",
              "ESRA_DATA_READ", ok="StoreState", errors=_STORE_ERRORS),
    Operation("post", "/store/enable", "Enable the tenant's document store.",
              "ESRA_DATA_MANAGE", ok="StoreState", errors=_STORE_ERRORS),
    Operation("post", "/store/initialise",
              "Start initialising the store in the background; poll GET /store.",
              "ESRA_DATA_MANAGE", ok_status=202, ok="StoreState", errors=(*_STORE_ERRORS, 409)),
    Operation("get", "/store/settings",
              "The store's settings (scan policy, byte retention, attempt ceiling, batch "
              "size); the revision is the ETag (0: never configured, the host's defaults).",
              "ESRA_DATA_READ", ok="StoreSettings", errors=(*_STORE_ERRORS, 409)),
    Operation("put", "/store/settings",
              "Change any of the store's settings at the revision If-Match names; audited "
              "with the settings before and after, applied at every worker's next turn.",
              "ESRA_DATA_MANAGE", ok="StoreSettings", body="StoreSettingsChange",
              errors=(400, *_STORE_ERRORS, 409, 415)),
    Operation("get", "/store/documents",
              "Store-wide counts for every state and one page of documents, every state, "
              "newest first: full-text search (q) plus state, scope, type and upload-time "
              "filters.",
              "ESRA_DATA_READ", ok="DocumentList", errors=(400, *_STORE_ERRORS, 409)),
    Operation("post", "/store/documents",
              "Upload files (multipart field 'files', optional 'scope'); each file's outcome.",
              "ESRA_DATA_MANAGE", ok_status=202, ok="UploadResult", body="Upload",
              errors=(400, *_STORE_ERRORS, 409, 413, 415)),
    Operation("get", "/store/documents/{document_id}", "One document with its findings.",
              "ESRA_DATA_READ", ok="Document", errors=(*_STORE_ERRORS, 409)),
    Operation("delete", "/store/documents/{document_id}",
              "Soft-delete a document: gone from search, fetch and the list.",
              "ESRA_DATA_MANAGE", ok_status=204, ok="", errors=(*_STORE_ERRORS, 409)),
    Operation("post", "/store/documents/{document_id}/release",
              "Release a Quarantined document to Indexed (audited with the operator).",
              "ESRA_DATA_MANAGE", ok="Document", errors=_DOCUMENT_ERRORS),
    Operation("post", "/store/documents/{document_id}/reindex",
              "Queue the document for extraction again from its retained bytes.",
              "ESRA_DATA_MANAGE", ok="Document", errors=_DOCUMENT_ERRORS),
    Operation("get", "/store/documents/{document_id}/download",
              "The original bytes, as an attachment.",
              "ESRA_DATA_MANAGE", ok="Download", errors=(*_STORE_ERRORS, 409)),
    Operation("get", "/config", "The tenant's configuration draft and secret references.",
              "ESRA_DATA_READ", ok="Configuration"),
    Operation("get", "/lookups",
              "The model profiles, client applications and trusted issuers the tenant's "
              "configuration may name.",
              "ESRA_DATA_READ", ok="Lookups"),
    Operation("put", "/secrets/{reference}", "Create or rotate a connection secret.",
              "SECURITY_MANAGE", body="Secret", errors=_CONFIG_ERRORS),
    Operation("put", "/sources/{source_id}", "Model a source and exactly its mappings.",
              "ESRA_DATA_MANAGE", body="SourceModel", errors=_CONFIG_ERRORS),
    Operation("put", "/capabilities/{capability_id}", "Add or replace a capability.",
              "ESRA_DATA_MANAGE", body="ConfigObject", errors=_CONFIG_ERRORS),
    Operation("put", "/access-policies/{slug}", "Author the access policy of a tool.",
              "GOVERNANCE_MANAGE", body="ConfigObject", errors=_CONFIG_ERRORS),
    Operation("put", "/exposures/{slug}", "Bind an exposure as an unpublished draft.",
              "ESRA_EXPOSURE_MANAGE", body="ConfigObject", errors=_CONFIG_ERRORS),
    Operation("post", "/exposures/{slug}/publish",
              "Re-validate the draft and publish the exposure to the running host.",
              "ESRA_EXPOSURE_MANAGE", errors=(400, 401, 403, 409, 422)),
    Operation("get", "/audit",
              "The tenant's audit records, newest first, filtered and keyset-paged.",
              "GOVERNANCE_MANAGE or SECURITY_MANAGE", ok="AuditPage",
              errors=(400, 401, 403, 404)),
    Operation("post", "/explain",
              "Run one search as a named caller of a named exposure and answer what the "
              "pipeline decided: scope funnel, selection, plans, validation verdicts, "
              "statements with parameter names, rows, scores, final order, stage times. "
              "Audited as esra.explain; never cached.",
              "ESRA_EXPOSURE_MANAGE", ok="Explanation", body="ExplainRequest",
              errors=(400, 401, 403, 404, 413, 415)),
)  # fmt: skip

_ERROR_TEXT = {
    400: "The request is not valid.",
    401: "No valid bearer token.",
    403: "The token's roles do not permit this action.",
    404: "No such resource for the token's tenant.",
    409: "The action does not apply in the current state, or the document is owned by a "
    "connector and read-only (ESRA_DOCUMENT_READ_ONLY).",
    413: "The request body is too large.",
    415: "Unsupported content type.",
    422: "The configuration is not valid.",
}

_OBJECT = {"type": "object"}
_NULLABLE_TEXT = {"type": ["string", "null"]}
_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            }
        },
    },
    "StoreState": {
        "type": "object",
        "required": ["status", "changedAt"],
        "properties": {
            "status": {
                "enum": ["disabled", "enabled", "initializing", "ready", "failed"],
            },
            "changedAt": {"type": "string", "format": "date-time"},
            "failure": _NULLABLE_TEXT,
            "remedy": _NULLABLE_TEXT,
            "counts": {"$ref": "#/components/schemas/Counts"},
        },
    },
    "Counts": {"type": "object", "additionalProperties": {"type": "integer"}},
    "StoreSettings": {
        "type": "object",
        "required": ["scanPolicy", "retainBytes", "maxAttempts", "batchPerTenant", "revision"],
        "properties": {
            "scanPolicy": {"enum": ["quarantine", "reject", "index_anyway"]},
            "retainBytes": {"type": "boolean"},
            "maxAttempts": {"type": "integer", "minimum": 1, "maximum": 100},
            "batchPerTenant": {"type": "integer", "minimum": 1, "maximum": 1000},
            "revision": {"type": "integer", "minimum": 0},
            "updatedAt": {"type": ["string", "null"], "format": "date-time"},
            "updatedBy": _NULLABLE_TEXT,
        },
    },
    "StoreSettingsChange": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "scanPolicy": {"enum": ["quarantine", "reject", "index_anyway"]},
            "retainBytes": {"type": "boolean"},
            "maxAttempts": {"type": "integer", "minimum": 1, "maximum": 100},
            "batchPerTenant": {"type": "integer", "minimum": 1, "maximum": 1000},
        },
    },
    "Finding": {
        "type": "object",
        "properties": {
            "rule": {"type": "string"},
            "start": {"type": "integer"},
            "end": {"type": "integer"},
            "excerpt": {"type": "string"},
            "excerpt_span": {
                "description": "[start, end) of the matched words in excerpt; null if unknown",
                "type": ["array", "null"],
                "items": {"type": "integer", "minimum": 0},
                "minItems": 2,
                "maxItems": 2,
            },
            "in_title": {"type": "boolean"},
        },
    },
    "Document": {
        "type": "object",
        "required": ["id", "title", "state"],
        "properties": {
            "id": {"type": "string"},
            "title": {"type": "string"},
            "format": {"type": "string"},
            "size": {"type": "integer"},
            "scope": {"type": "string"},
            "state": {"enum": ["pending", "processing", "indexed", "quarantined", "failed"]},
            "segmentCount": {"type": "integer"},
            "failure": {
                "type": ["object", "null"],
                "properties": {
                    "reason": {"type": "string"},
                    "breach": {
                        "type": ["string", "null"],
                        "description": "The safety limit the document broke, when that is why.",
                    },
                    "remedy": {"type": "string"},
                },
            },
            "uploadedBy": {
                "type": ["string", "null"],
                "description": "The subject that uploaded it (cli:<user> for esra ingest).",
            },
            "findings": {"type": "array", "items": {"$ref": "#/components/schemas/Finding"}},
            "zeroSegments": {"type": "boolean"},
            "releaseAvailable": {"type": "boolean"},
            "reindexAvailable": {"type": "boolean"},
            "reindexUnavailableReason": _NULLABLE_TEXT,
            "downloadAvailable": {"type": "boolean"},
            "deleteAvailable": {"type": "boolean"},
            "owner": {
                "type": "object",
                "required": ["kind"],
                "properties": {
                    "kind": {"enum": ["uploaded", "connector"]},
                    "connector": _NULLABLE_TEXT,
                },
            },
            "readOnly": {"type": "boolean"},
            "readOnlyReason": _NULLABLE_TEXT,
        },
    },
    "DocumentList": {
        "type": "object",
        "properties": {
            "counts": {"$ref": "#/components/schemas/Counts"},
            "filter": {"type": "array", "items": {"type": "string"}},
            "documents": {"type": "array", "items": {"$ref": "#/components/schemas/Document"}},
            "nextCursor": {"type": ["string", "null"]},
        },
    },
    "UploadResult": {
        "type": "object",
        "properties": {
            "stored": {"type": "integer", "description": "Files queued for indexing."},
            "failed": {
                "type": "integer",
                "description": "Files kept as Failed documents (a safety limit was broken).",
            },
            "refused": {"type": "integer", "description": "Files not kept."},
            "files": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["filename", "outcome"],
                    "properties": {
                        "filename": {
                            "type": "string",
                            "description": "The file's sanitised name (its stored title).",
                        },
                        "outcome": {"enum": ["stored", "failed", "refused"]},
                        "documentId": {"type": "string"},
                        "state": {"type": "string"},
                        "reason": {"type": "string"},
                        "breach": {"type": ["string", "null"]},
                        "remedy": {"type": "string"},
                    },
                },
            },
        },
    },
    "Upload": {
        "type": "object",
        "required": ["files"],
        "properties": {
            "files": {"type": "array", "items": {"type": "string", "format": "binary"}},
            "scope": {"type": "string", "maxLength": 128},
        },
    },
    "Workspace": {
        "type": "object",
        "properties": {
            "version": {"type": "integer"},
            "publishedVersion": {"type": ["integer", "null"]},
        },
    },
    "Configuration": _OBJECT,
    "Secret": {
        "type": "object",
        "required": ["value"],
        "additionalProperties": False,
        "properties": {"value": {"type": "string", "minLength": 1}},
    },
    "SourceModel": {
        "type": "object",
        "required": ["source"],
        "additionalProperties": False,
        "properties": {"source": _OBJECT, "mappings": {"type": "array", "items": _OBJECT}},
    },
    "ConfigObject": _OBJECT,
    "AuditRecord": {
        "type": "object",
        "required": ["event", "tenantId", "correlationId", "at", "outcome"],
        "properties": {
            "event": {"type": "string"},
            "tenantId": {"type": "string"},
            "correlationId": {"type": "string"},
            "at": {"type": "string", "format": "date-time"},
            "outcome": {"type": "string"},
            "reason": _NULLABLE_TEXT,
            "dimensions": _OBJECT,
        },
    },
    "ExplainRequest": {
        "type": "object",
        "required": ["exposure", "arguments", "caller"],
        "additionalProperties": False,
        "properties": {
            "exposure": {"type": "string", "description": "The exposure's slug."},
            "arguments": {
                "type": "object",
                "description": "The search tool's arguments: prompt and optional filters.",
            },
            "caller": {
                "type": "object",
                "required": ["subject", "clientApp"],
                "additionalProperties": False,
                "properties": {
                    "subject": {"type": "string"},
                    "clientApp": {"type": "string"},
                    "claims": {"type": "object", "description": "The caller's token claims."},
                },
            },
            "authorizedSources": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The platform's runtime authorization (default: none).",
            },
        },
    },
    "Explanation": {
        "type": "object",
        "required": ["correlationId", "status", "decisions", "plans", "validation",
                     "queries", "ranking", "stages"],
        "properties": {
            "correlationId": {"type": "string"},
            "status": {"type": "string", "description": "The response's status, or error."},
            "error": _NULLABLE_TEXT,
            "decisions": {"type": "array", "items": _OBJECT,
                          "description": "The invocation's audit records, in order."},
            "plans": {"type": "array", "items": _OBJECT},
            "validation": {"type": "array", "items": _OBJECT},
            "queries": {"type": "array", "items": _OBJECT},
            "candidates": {"type": "integer"},
            "ranking": {"type": "array", "items": _OBJECT},
            "warnings": {"type": "array", "items": {"type": "string"}},
            "stages": {"type": "array", "items": _OBJECT},
        },
    },
    "AuditPage": {
        "type": "object",
        "required": ["records", "nextCursor"],
        "properties": {
            "records": {"type": "array", "items": {"$ref": "#/components/schemas/AuditRecord"}},
            "nextCursor": {
                "type": ["string", "null"],
                "description": "Pass as ?cursor= for the next page; null on the last.",
            },
        },
    },
    "Lookups": {
        "type": "object",
        "required": ["modelProfiles", "clientApplications", "trustedIssuers"],
        "properties": {
            "modelProfiles": {"type": "array", "items": {
                "type": "object", "required": ["name", "kind", "model"],
                "properties": {"name": {"type": "string"}, "kind": {"type": "string"},
                               "model": {"type": ["string", "null"]}}}},
            "clientApplications": {"type": "array", "items": {"type": "string"}},
            "trustedIssuers": {"type": "array", "items": {
                "type": "object", "required": ["issuer", "audiences"],
                "properties": {"issuer": {"type": "string"},
                               "audiences": {"type": "array", "items": {"type": "string"}}}}},
        },
    },
}  # fmt: skip

_TEXT = {"type": "string"}
_AUDIT_PARAMETERS: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("event", {"type": "array", "items": _TEXT}, "Event names (repeatable)."),
    ("subject", _TEXT, "Who acted."),
    ("since", {"type": "string", "format": "date-time"}, "Inclusive; with a UTC offset."),
    ("until", {"type": "string", "format": "date-time"}, "Exclusive; with a UTC offset."),
    ("correlation_id", _TEXT, "One invocation's records."),
    ("limit", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}, "Page size."),
    ("cursor", _TEXT, "The previous page's nextCursor."),
)


_DOCUMENT_SEARCH_PARAMETERS: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("q", {"type": "string", "maxLength": 200},
     "Text: a document matches when its title contains it (ignoring ASCII case) or one of "
     "its segments holds every word, through the store's own full-text index."),
    ("state", {"type": "array", "items": {"type": "string", "enum": [
        "pending", "processing", "indexed", "quarantined", "failed"]}},
     "Document states (repeatable; any of them)."),
    ("scope", _TEXT, "The security scope given at upload."),
    ("uploader", {"type": "string", "maxLength": 256},
     "The subject that uploaded it, exactly (cli:<user> for esra ingest)."),
    ("type", {"type": "array", "items": {"type": "string", "enum": [
        "txt", "md", "csv", "pdf", "docx"]}}, "Formats (repeatable; any of them)."),
    ("since", {"type": "string", "format": "date-time"},
     "Uploaded at or after; with a UTC offset."),
    ("until", {"type": "string", "format": "date-time"}, "Uploaded before; with a UTC offset."),
    ("limit", {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}, "Page size."),
    ("cursor", _TEXT, "The previous page's nextCursor."),
)  # fmt: skip


def _responses(operation: Operation) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    if operation.ok == "Download":
        responses[str(operation.ok_status)] = {
            "description": "The original bytes (Content-Disposition: attachment).",
            "content": {"application/octet-stream": {"schema": {"type": "string"}}},
        }
    elif operation.ok:
        responses[str(operation.ok_status)] = {
            "description": "OK",
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{operation.ok}"}}
            },
        }
    else:
        responses[str(operation.ok_status)] = {"description": "Done; no body."}
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for status in sorted({*operation.errors, 500}):
        text = _ERROR_TEXT.get(status, "Unexpected failure (no details are disclosed).")
        responses[str(status)] = {"description": text, "content": error}
    return responses


_TENANT_PARAMETER: dict[str, Any] = {
    "name": "ESRA-Tenant",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_TENANT_CHARS},
    "description": "The tenant to act on (default: the token's). Roles there come from the "
    "cross-tenant roles claim, and only from an issuer trusted for that tenant; a caller "
    "without a grant there is refused as one missing the role.",
}


def _operation(operation: Operation) -> dict[str, Any]:
    described: dict[str, Any] = {
        "summary": operation.summary,
        "description": f"Requires the role {operation.role} on the tenant acted on: the one "
        "ESRA-Tenant names, else the token's.",
        "x-esra-role": operation.role,
        "responses": _responses(operation),
    }
    names = [part[1:-1] for part in operation.path.split("/") if part.startswith("{")]
    parameters: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in names
    ]
    parameters.append(_TENANT_PARAMETER)
    if operation.path == "/store/documents" and operation.method == "get":
        parameters.extend(
            {"name": name, "in": "query", "required": False, "schema": schema,
             "description": text, **({"explode": True} if name in {"state", "type"} else {})}
            for name, schema, text in _DOCUMENT_SEARCH_PARAMETERS
        )  # fmt: skip
    if operation.path == "/audit":
        parameters.extend(
            {"name": name, "in": "query", "required": False, "schema": schema,
             "description": text, **({"explode": True} if name == "event" else {})}
            for name, schema, text in _AUDIT_PARAMETERS
        )  # fmt: skip
    if parameters:
        described["parameters"] = parameters
    if operation.body is not None:
        media = "multipart/form-data" if operation.body == "Upload" else "application/json"
        described["requestBody"] = {
            "required": True,
            "content": {media: {"schema": {"$ref": f"#/components/schemas/{operation.body}"}}},
        }
    return described


def openapi_document(base_path: str, *, title: str = "ESRA admin API") -> dict[str, Any]:
    """The OpenAPI document of the admin API served under ``base_path``."""
    paths: dict[str, dict[str, Any]] = {}
    for operation in OPERATIONS:
        paths.setdefault(base_path + operation.path, {})[operation.method] = _operation(operation)
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": "1"},
        "paths": paths,
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
            },
        },
        "security": [{"bearer": []}],
    }
