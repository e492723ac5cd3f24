"""The document store portal: server-rendered pages for operators, mounted by the host.

``portal_app(stores=..., verifier=..., roles_claim=...)`` returns the ASGI app the host
mounts at ``/portal``: store status (polled while Initializing), the review list with
store-wide counts as filters, per-document review with the scanner's findings and the
Release action, re-index where the original bytes were retained, uploads reported per file,
and downloads for ``ESRA_DATA_MANAGE`` only. It signs operators in with the same bearer
tokens and roles as the admin API. See ``docs/portal.md``.
"""

from esra.starlette._portal.app import portal_app

__all__ = ["portal_app"]
