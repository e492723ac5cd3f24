"""PostgresDocumentRepository: the ``DocumentRepository`` port over the store schema (psycopg 3).

The queue follows the anchors (procrastinate, River, graphile-worker)::

    WITH picked AS (
        SELECT id FROM documents
        WHERE tenant_id = :tenant AND deleted_at IS NULL AND attempts < :max AND data IS NOT NULL
          AND (state = 'pending' OR (state = 'processing' AND lease_until <= :now))
        ORDER BY created_at, seq LIMIT :n
        FOR UPDATE SKIP LOCKED)
    UPDATE documents d SET state = 'processing', attempts = d.attempts + 1,
           claim_seq = d.claim_seq + 1, locked_by = :worker, lease_until = :now + :lease
    FROM picked WHERE d.id = picked.id RETURNING ..., d.data

- attempts increase at claim, so a file that kills its worker still uses up attempts;
- an expired lease is claimable again by the same statement (no separate reaper);
- the claim hands the bytes over in the statement that takes the lease: no document is
  claimed without its content;
- completion, failure and heartbeat are fenced ``WHERE id = :id AND locked_by = :worker AND
  attempts = :n AND claim_seq = :seq AND state = 'processing'``: a worker that lost its lease
  changes nothing. ``claim_seq`` counts the document's claims and nothing resets it, so the
  fence never repeats: a re-index resets ``attempts``, and one worker process claims under
  one worker id, so (worker, attempt) alone would let a claim from before a re-index write
  over the current one's;
- segments are replaced in the completing transaction, so a document is never Indexed
  with half its segments;
- a delete erases the content (bytes, text, segments, findings, reserved edit columns) in
  its transaction and moves ``claim_seq``, so a claim in flight cannot write it back; the
  old row versions remain as dead tuples until VACUUM, which the product never runs.

An operator's release, reindex or delete, an upload's ``add`` and a settings change's
``save_configuration`` given its audit record inserts it into the schema's ``audit_outbox`` in
the action's transaction. ``claim_audit`` hands the oldest held record to one forwarder at a
time across every host on the store, as ``PostgresConfigStore``'s outbox does: one
transaction takes the transaction-scoped advisory lock ``esra.store.audit_outbox:<schema>``
without waiting (held: another host is forwarding), reads the oldest record, stays open while
the audit sink is handed it and deletes it before committing; the server releases the lock
with a host that dies mid-forward.

Time is the caller's ``now`` (the ``Clock`` port, as every ``DocumentRepository`` takes it),
not the server's ``now()``, so leases behave identically under a fake clock; production
workers use the system clock. Every statement names the tenant (or the claim's document and
owner) explicitly: there is no global filter to forget.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any, Self

from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from esra.core.audit import AuditRecord, record_document
from esra.core.codes import DocumentRefusal
from esra.core.docstore import (
    REMEDIES,
    UPLOADED,
    AcceptedUpload,
    Breach,
    Claim,
    ConfigurableSettings,
    DocumentOwner,
    DocumentPage,
    DocumentRefusedError,
    DocumentSearch,
    DocumentState,
    Finding,
    IndexedContent,
    QueueStats,
    StoreConfiguration,
    StoredDocument,
    claimed,
    findings_json,
    remedy_for,
    stored_document,
)
from esra.postgres._audit_outbox import claim_held_record, held_records
from esra.postgres._connection import scrub, storable_json
from esra.postgres._pool import Pool, open_pool, ping_pool
from esra.postgres._store_schema import DEFAULT_STORE_SCHEMA

__all__ = ["PostgresDocumentRepository"]

# The advisory lock of the audit outbox's claim, per store schema (the schema migrations'
# transaction locks are ``esra.store:<schema>``).
_CLAIM_LOCK = "esra.store.audit_outbox"

# Named as StoredDocument's attributes, which esra.core._docstore.document_rows reads by name.
_COLUMNS = (
    "id, tenant_id, title, format, sha256, size, scope, state, attempts, created_at, "
    "updated_at, revision, segment_count, failure, remedy, findings, bytes_retained, "
    "deleted_at IS NOT NULL AS deleted, released_by, owner_kind, owner_connector, uploaded_by, "
    "failure_breach"
)
_OWNED = (
    "id = %(id)s AND tenant_id = %(tenant)s AND locked_by = %(worker)s "
    "AND attempts = %(attempt)s AND claim_seq = %(claim_seq)s AND state = 'processing'"
)
_CLAIMABLE = (
    "deleted_at IS NULL AND attempts < %(max)s AND data IS NOT NULL "
    "AND (state = 'pending' OR (state = 'processing' AND lease_until <= %(now)s))"
)


class PostgresDocumentRepository:
    """The document store's repository and work queue on PostgreSQL.

    Args:
        pool: an open pool of autocommit connections to the store's database (each method
            opens its own transaction).
        schema: the store schema (``apply_store_schema`` created it).
        retain_bytes: keep original bytes once a document is Indexed or Quarantined. A
            failed document keeps them whatever this says: re-extraction is its only recovery.

    ``open(...)`` builds one with its own pool; ``close()`` closes a pool it owns.
    """

    def __init__(
        self, pool: Pool, *, schema: str = DEFAULT_STORE_SCHEMA, retain_bytes: bool = True
    ) -> None:
        self._pool = pool
        self._owns_pool = False
        self._retain = retain_bytes
        self._documents = sql.Identifier(schema, "documents")
        self._segments = sql.Identifier(schema, "segments")
        self._versions = sql.Identifier(schema, "schema_version")
        self._settings = sql.Identifier(schema, "store_settings")
        self._outbox = sql.Identifier(schema, "audit_outbox")
        self._schema = schema

    @classmethod
    async def open(
        cls,
        conninfo: str = "",
        *,
        kwargs: Mapping[str, Any] | None = None,
        schema: str = DEFAULT_STORE_SCHEMA,
        retain_bytes: bool = True,
        min_size: int = 1,
        max_size: int = 4,
    ) -> Self:
        """Open a pool (``conninfo`` and/or ``kwargs`` from ``connect_kwargs``) and wrap it."""
        pool = await open_pool(
            conninfo, kwargs=kwargs, name="esra-store", min_size=min_size, max_size=max_size
        )
        repository = cls(pool, schema=schema, retain_bytes=retain_bytes)
        repository._owns_pool = True
        return repository

    async def close(self) -> None:
        """Close the pool if this repository opened it."""
        if self._owns_pool:
            await self._pool.close()

    async def ping(self) -> None:
        """``SELECT 1`` on the pool (for the host's readiness check); raises if it cannot."""
        await ping_pool(self._pool)

    def _q(self, text: str) -> sql.Composed:
        # Identifiers come from configuration, fragments from this module's constants;
        # every value is a bound parameter.
        return sql.SQL(text).format(
            d=self._documents,
            s=self._segments,
            t=self._settings,
            o=self._outbox,
            cols=sql.SQL(_COLUMNS),
            owned=sql.SQL(_OWNED),
            claimable=sql.SQL(_CLAIMABLE),
        )

    async def _one(
        self, statement: sql.Composed, params: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        async with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(statement, params)
            return await cur.fetchone()

    async def _act(
        self,
        statement: sql.Composed,
        params: Mapping[str, Any],
        audit: Callable[[dict[str, Any]], AuditRecord] | None,
        *,
        then: sql.Composed | None = None,
    ) -> dict[str, Any] | None:
        """Run an action's ``INSERT``/``UPDATE … RETURNING`` and, when it wrote a row, run
        ``then`` (with the same ``params``) and hold the record ``audit`` makes of the row in
        the outbox, in one transaction."""
        async with (
            self._pool.connection() as conn,
            conn.transaction(),
            conn.cursor(row_factory=dict_row) as cur,
        ):
            await cur.execute(statement, params)
            row = await cur.fetchone()
            if row is not None and then is not None:
                await cur.execute(then, params)
            if row is not None and audit is not None:
                record = audit(row)
                await cur.execute(
                    self._q("INSERT INTO {o} (correlation_id, record) VALUES (%(id)s, %(record)s)"),
                    {
                        "id": scrub(record.correlation_id),
                        "record": Jsonb(storable_json(record_document(record))),
                    },
                )
            return row

    async def add(
        self,
        tenant_id: str,
        upload: AcceptedUpload,
        *,
        scope: str,
        now: datetime,
        owner: DocumentOwner = UPLOADED,
        uploaded_by: str | None = None,
        audit: Callable[[StoredDocument], AuditRecord] | None = None,
    ) -> StoredDocument:
        """Persist a Pending document with its bytes, owned by ``owner``; refuse a duplicate
        hash in the tenant. An upload with a ``breach`` is inserted Failed, naming it.

        The partial unique index decides (``ON CONFLICT DO NOTHING``), so two concurrent
        uploads of one file cannot both be stored. ``audit``'s record of the stored document
        is held in the same transaction.
        """
        failure = DocumentRefusal.MALFORMED_DOCUMENT if upload.breach is not None else None
        params = {
            "tenant": tenant_id,
            "title": scrub(upload.display_name),
            "format": upload.format.value,
            "sha": upload.sha256,
            "size": len(upload.data),
            "scope": scope,
            "now": now,
            "data": upload.data,
            "owner_kind": owner.kind.value,
            "owner_connector": owner.connector,  # printable by construction
            "uploaded_by": scrub(uploaded_by) if uploaded_by is not None else None,
            "state": (DocumentState.FAILED if failure else DocumentState.PENDING).value,
            "failure": failure.value if failure is not None else None,
            "breach": upload.breach.value if upload.breach is not None else None,
            "remedy": remedy_for(failure, upload.breach) if failure is not None else None,
        }
        row = await self._act(
            self._q(
                "INSERT INTO {d} (tenant_id, title, format, sha256, size, scope, state,"
                " created_at, updated_at, data, owner_kind, owner_connector, uploaded_by,"
                " failure, failure_breach, remedy)"
                " VALUES (%(tenant)s, %(title)s, %(format)s, %(sha)s, %(size)s, %(scope)s,"
                " %(state)s, %(now)s, %(now)s, %(data)s, %(owner_kind)s, %(owner_connector)s,"
                " %(uploaded_by)s, %(failure)s, %(breach)s, %(remedy)s)"
                " ON CONFLICT (tenant_id, sha256) WHERE deleted_at IS NULL DO NOTHING"
                " RETURNING {cols}"
            ),
            params,
            None if audit is None else (lambda added: audit(stored_document(added))),
        )
        if row is not None:
            return stored_document(row)
        existing = await self._one(
            self._q(
                "SELECT title FROM {d} WHERE tenant_id = %(tenant)s AND sha256 = %(sha)s"
                " AND deleted_at IS NULL"
            ),
            params,
        )
        title = str(existing["title"]) if existing else ""
        raise DocumentRefusedError(DocumentRefusal.DUPLICATE_DOCUMENT, detail=title)

    async def tenants_with_work(self, *, now: datetime) -> list[str]:
        """Tenants with a Pending document, or a Processing one whose lease expired."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                self._q(
                    "SELECT DISTINCT tenant_id FROM {d} WHERE deleted_at IS NULL"
                    " AND (state = 'pending' OR (state = 'processing' AND lease_until <= %(now)s))"
                    " ORDER BY tenant_id"
                ),
                {"now": now},
            )
            return [str(row[0]) for row in await cursor.fetchall()]

    def claim_statement(self) -> sql.Composed:
        """The claim statement (exposed so its plan can be checked with ``EXPLAIN``)."""
        return self._q(
            "WITH picked AS ("
            " SELECT id FROM {d} WHERE tenant_id = %(tenant)s AND {claimable}"
            " ORDER BY created_at, seq LIMIT %(limit)s FOR UPDATE SKIP LOCKED)"
            " UPDATE {d} AS t SET state = 'processing', attempts = t.attempts + 1,"
            " claim_seq = t.claim_seq + 1, locked_by = %(worker)s,"
            " lease_until = %(now)s + %(lease)s, updated_at = %(now)s"
            " FROM picked WHERE t.id = picked.id AND t.tenant_id = %(tenant)s"
            " RETURNING t.id, t.attempts, t.claim_seq, t.title, t.format, t.data, t.lease_until,"
            " t.created_at, t.seq"
        )

    async def claim(
        self,
        tenant_id: str,
        *,
        worker_id: str,
        limit: int,
        lease_s: float,
        max_attempts: int,
        now: datetime,
    ) -> list[Claim]:
        """Claim up to ``limit`` claimable documents of one tenant, oldest first."""
        if limit < 1:
            return []
        params = {
            "tenant": tenant_id,
            "worker": worker_id,
            "limit": limit,
            "lease": timedelta(seconds=lease_s),
            "max": max_attempts,
            "now": now,
        }
        async with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(self.claim_statement(), params)
            rows = await cur.fetchall()
        rows.sort(key=lambda r: (r["created_at"], r["seq"]))
        return [
            claimed(row, tenant_id=tenant_id, worker_id=worker_id, lease_until=row["lease_until"])
            for row in rows
        ]

    @staticmethod
    def _owner(claim: Claim) -> dict[str, Any]:
        return {
            "id": claim.document_id,
            "tenant": claim.tenant_id,
            "worker": claim.worker_id,
            "attempt": claim.attempt,
            "claim_seq": claim.claim_seq,
        }

    async def heartbeat(self, claim: Claim, *, lease_s: float, now: datetime) -> bool:
        """Extend the lease while the claim still owns the document."""
        params = {**self._owner(claim), "lease": timedelta(seconds=lease_s), "now": now}
        row = await self._one(
            self._q("UPDATE {d} SET lease_until = %(now)s + %(lease)s WHERE {owned} RETURNING id"),
            params,
        )
        return row is not None

    async def complete(self, claim: Claim, content: IndexedContent, *, now: datetime) -> bool:
        """Store text and segments and set the final state, only if the claim still owns it."""
        params = {
            **self._owner(claim),
            "now": now,
            "state": content.state.value,
            "text": scrub(content.text),
            "findings": findings_json(content.findings),
            "count": len(content.segments),
            "retain": self._retain and content.retain_bytes,
        }
        async with self._pool.connection() as conn, conn.transaction():
            cursor = await conn.execute(
                self._q(
                    "UPDATE {d} SET state = %(state)s, text = %(text)s,"
                    " findings = %(findings)s::jsonb, segment_count = %(count)s,"
                    " revision = revision + 1, failure = NULL, failure_breach = NULL,"
                    " remedy = NULL,"
                    " locked_by = NULL, lease_until = NULL, updated_at = %(now)s,"
                    " data = CASE WHEN %(retain)s THEN data END,"
                    " bytes_retained = %(retain)s AND data IS NOT NULL"
                    " WHERE {owned} RETURNING title"
                ),
                params,
            )
            row = await cursor.fetchone()
            if row is None:
                return False
            title = str(row[0])
            await conn.execute(
                self._q("DELETE FROM {s} WHERE document_id = %(id)s AND tenant_id = %(tenant)s"),
                params,
            )
            if content.segments:
                async with conn.cursor() as cur:
                    await cur.executemany(
                        self._q(
                            "INSERT INTO {s} (document_id, tenant_id, ordinal, label, title,"
                            " body, indexed) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                        ),
                        [
                            (
                                claim.document_id,
                                claim.tenant_id,
                                s.ordinal,
                                scrub(s.label),
                                title,
                                scrub(s.body),
                                scrub(s.indexed),
                            )
                            for s in content.segments
                        ],
                    )
        return True

    async def fail(
        self,
        claim: Claim,
        refusal: DocumentRefusal,
        *,
        retry: bool,
        now: datetime,
        findings: tuple[Finding, ...] = (),
        breach: Breach | None = None,
    ) -> bool:
        """Fail the claim's document (or return it to Pending), fenced; bytes are kept."""
        params = {
            **self._owner(claim),
            "now": now,
            "state": (DocumentState.PENDING if retry else DocumentState.FAILED).value,
            "failure": refusal.value,
            "breach": breach.value if breach is not None else None,
            "remedy": remedy_for(refusal, breach),
            "findings": findings_json(findings),
        }
        row = await self._one(
            self._q(
                "UPDATE {d} SET state = %(state)s, failure = %(failure)s, remedy = %(remedy)s,"
                " failure_breach = %(breach)s, findings = %(findings)s::jsonb, locked_by = NULL,"
                " lease_until = NULL,"
                " updated_at = %(now)s WHERE {owned} RETURNING id"
            ),
            params,
        )
        return row is not None

    async def fail_exhausted(self, tenant_id: str, *, max_attempts: int, now: datetime) -> int:
        """Fail the tenant's documents at the attempt ceiling that no claim holds (a lapsed
        lease, or Pending above a lowered ceiling); return how many (``max_attempts`` is the
        tenant's own; other tenants may share this schema)."""
        refusal = DocumentRefusal.MALFORMED_DOCUMENT
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                self._q(
                    "UPDATE {d} SET state = 'failed', failure = %(failure)s, remedy = %(remedy)s,"
                    " failure_breach = NULL, locked_by = NULL, lease_until = NULL,"
                    " updated_at = %(now)s"
                    " WHERE tenant_id = %(tenant)s AND attempts >= %(max)s"
                    " AND ((state = 'pending' AND deleted_at IS NULL)"
                    " OR (state = 'processing' AND lease_until <= %(now)s))"
                ),
                {
                    "tenant": tenant_id,
                    "failure": refusal.value,
                    "remedy": REMEDIES[refusal],
                    "now": now,
                    "max": max_attempts,
                },
            )
            return max(cursor.rowcount, 0)

    async def get(self, tenant_id: str, document_id: str) -> StoredDocument | None:
        """One document's metadata (soft-deleted ones included, flagged)."""
        row = await self._one(
            self._q("SELECT {cols} FROM {d} WHERE id = %(id)s AND tenant_id = %(tenant)s"),
            {"id": document_id, "tenant": tenant_id},
        )
        return stored_document(row) if row else None

    async def list(
        self, tenant_id: str, *, states: Collection[DocumentState] | None = None
    ) -> list[StoredDocument]:
        """Non-deleted documents of the tenant in every state (or the given ones), newest first."""
        wanted = [s.value for s in (states if states is not None else DocumentState)]
        async with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                self._q(
                    "SELECT {cols} FROM {d} WHERE tenant_id = %(tenant)s"
                    " AND deleted_at IS NULL AND state = ANY(%(states)s)"
                    " ORDER BY created_at DESC, seq DESC"
                ),
                {"tenant": tenant_id, "states": wanted},
            )
            return [stored_document(row) for row in await cur.fetchall()]

    async def counts(self, tenant_id: str) -> Mapping[DocumentState, int]:
        """Store-wide counts per state (non-deleted), every state present."""
        counts = dict.fromkeys(DocumentState, 0)
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                self._q(
                    "SELECT state, count(*) FROM {d} WHERE tenant_id = %(tenant)s"
                    " AND deleted_at IS NULL GROUP BY state"
                ),
                {"tenant": tenant_id},
            )
            for state, count in await cursor.fetchall():
                counts[DocumentState(state)] = int(count)
        return counts

    async def queue_stats(self, tenant_id: str) -> QueueStats:
        """The tenant's live Pending documents: how many, and the oldest ``updated_at``."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                self._q(
                    "SELECT count(*), min(updated_at) FROM {d} WHERE tenant_id = %(tenant)s"
                    " AND deleted_at IS NULL AND state = 'pending'"
                ),
                {"tenant": tenant_id},
            )
            row = await cursor.fetchone()
        waiting, oldest = row if row is not None else (0, None)
        return QueueStats(waiting=int(waiting), oldest_queued_at=oldest)

    async def search_documents(self, tenant_id: str, query: DocumentSearch) -> DocumentPage:
        """Live documents matching ``query``, every state, newest first by ``(created_at, id)``.

        The text matches the title (``strpos`` over ``lower``) or a segment whose ``tsvector``
        (GIN-indexed) holds every word: each word is its own ``phraseto_tsquery`` bind value,
        as the provider's ``TsvectorFullText`` binds terms, under the text search
        configuration the store's schema was applied with (read from ``schema_version``), so
        the words tokenize exactly as the segments were indexed. ``id`` orders and compares
        under ``COLLATE "C"``: code-point order, the cursor's, whatever the database collation.
        """
        statement, params = self._search_statement(tenant_id, query)
        async with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(statement, params)
            rows = await cur.fetchall()
        return DocumentPage.of([stored_document(row) for row in rows], query.limit)

    async def load_configuration(self, tenant_id: str) -> StoreConfiguration | None:
        """The tenant's configured store settings, or None if it never configured them."""
        row = await self._one(
            self._q(
                "SELECT scan_policy, retain_bytes, max_attempts, batch_per_tenant, revision,"
                " updated_at, updated_by FROM {t} WHERE tenant_id = %(tenant)s"
            ),
            {"tenant": tenant_id},
        )
        return StoreConfiguration.from_row(row) if row is not None else None

    async def save_configuration(
        self,
        tenant_id: str,
        settings: ConfigurableSettings,
        *,
        expected_revision: int,
        by: str,
        now: datetime,
        audit: Callable[[StoreConfiguration], AuditRecord] | None = None,
    ) -> StoreConfiguration | None:
        """Store ``settings`` as the next revision if the stored one is ``expected_revision``.

        One statement decides: ``INSERT … ON CONFLICT DO NOTHING`` for the first revision,
        ``UPDATE … WHERE revision = %(expected)s`` after it. ``audit``'s record of the stored
        revision is held in the same transaction.
        """
        params = {
            "tenant": tenant_id,
            "policy": settings.scan_policy.value,
            "retain": settings.retain_bytes,
            "attempts": settings.max_attempts,
            "batch": settings.batch_per_tenant,
            "expected": expected_revision,
            "now": now,
            "by": scrub(by),
        }
        if expected_revision == 0:
            statement = self._q(
                "INSERT INTO {t} (tenant_id, scan_policy, retain_bytes, max_attempts,"
                " batch_per_tenant, revision, updated_at, updated_by)"
                " VALUES (%(tenant)s, %(policy)s, %(retain)s, %(attempts)s, %(batch)s, 1,"
                " %(now)s, %(by)s) ON CONFLICT (tenant_id) DO NOTHING"
                " RETURNING scan_policy, retain_bytes, max_attempts, batch_per_tenant,"
                " revision, updated_at, updated_by"
            )
        else:
            statement = self._q(
                "UPDATE {t} SET scan_policy = %(policy)s, retain_bytes = %(retain)s,"
                " max_attempts = %(attempts)s, batch_per_tenant = %(batch)s,"
                " revision = revision + 1, updated_at = %(now)s, updated_by = %(by)s"
                " WHERE tenant_id = %(tenant)s AND revision = %(expected)s"
                " RETURNING scan_policy, retain_bytes, max_attempts, batch_per_tenant,"
                " revision, updated_at, updated_by"
            )
        row = await self._act(
            statement,
            params,
            None if audit is None else (lambda saved: audit(StoreConfiguration.from_row(saved))),
        )
        return StoreConfiguration.from_row(row) if row is not None else None

    def _search_statement(
        self, tenant_id: str, query: DocumentSearch
    ) -> tuple[sql.Composed, dict[str, Any]]:
        where: list[sql.Composable] = [sql.SQL("tenant_id = %(tenant)s AND deleted_at IS NULL")]
        params: dict[str, Any] = {"tenant": tenant_id, "limit": query.limit + 1}
        if query.states:
            where.append(sql.SQL("state = ANY(%(states)s)"))
            params["states"] = sorted(state.value for state in query.states)
        if query.scope is not None:
            where.append(sql.SQL("scope = %(scope)s"))
            params["scope"] = query.scope
        if query.formats:
            where.append(sql.SQL("format = ANY(%(formats)s)"))
            params["formats"] = sorted(f.value for f in query.formats)
        if query.uploader is not None:
            where.append(sql.SQL("uploaded_by = %(uploader)s"))
            params["uploader"] = scrub(query.uploader)
        if query.uploaded_since is not None:
            where.append(sql.SQL("created_at >= %(since)s"))
            params["since"] = query.uploaded_since
        if query.uploaded_until is not None:
            where.append(sql.SQL("created_at < %(until)s"))
            params["until"] = query.uploaded_until
        if query.cursor is not None:
            where.append(
                sql.SQL(
                    "(created_at < %(cursor_at)s OR (created_at = %(cursor_at)s"
                    ' AND id COLLATE "C" < %(cursor_id)s))'
                )
            )
            params["cursor_at"] = query.cursor.created_at
            params["cursor_id"] = query.cursor.document_id
        if query.text is not None:
            text: list[sql.Composable] = [sql.SQL("strpos(lower(title), lower(%(text)s)) > 0")]
            params["text"] = query.text
            if query.words:
                config = sql.SQL(
                    "(SELECT text_search_config FROM {v} ORDER BY version DESC LIMIT 1)::regconfig"
                ).format(v=self._versions)
                tsquery = sql.SQL(" && ").join(
                    sql.SQL("phraseto_tsquery({cfg}, {word})").format(
                        cfg=config, word=sql.Placeholder(f"w{i}")
                    )
                    for i in range(len(query.words))
                )
                text.append(
                    sql.SQL(
                        "id IN (SELECT document_id FROM {s} WHERE tenant_id = %(tenant)s"
                        " AND tsv @@ ({q}))"
                    ).format(s=self._segments, q=tsquery)
                )
                params.update({f"w{i}": word for i, word in enumerate(query.words)})
            where.append(sql.SQL("({})").format(sql.SQL(" OR ").join(text)))
        statement = sql.SQL(
            "SELECT {cols} FROM {d} WHERE {where}"
            ' ORDER BY created_at DESC, id COLLATE "C" DESC LIMIT %(limit)s'
        ).format(cols=sql.SQL(_COLUMNS), d=self._documents, where=sql.SQL(" AND ").join(where))
        return statement, params

    async def release(
        self,
        tenant_id: str,
        document_id: str,
        *,
        operator: str,
        now: datetime,
        audit: Callable[[StoredDocument], AuditRecord] | None = None,
    ) -> StoredDocument | None:
        """Move a Quarantined document to Indexed, recording the operator; None otherwise.

        ``audit``'s record of the released document is held in the same transaction."""
        row = await self._act(
            self._q(
                "UPDATE {d} SET state = 'indexed', released_by = %(operator)s,"
                " updated_at = %(now)s WHERE id = %(id)s AND tenant_id = %(tenant)s"
                " AND deleted_at IS NULL AND state = 'quarantined'"
                " RETURNING {cols}"
            ),
            {"id": document_id, "tenant": tenant_id, "operator": operator, "now": now},
            None if audit is None else (lambda released: audit(stored_document(released))),
        )
        return stored_document(row) if row else None

    async def reindex(
        self,
        tenant_id: str,
        document_id: str,
        *,
        now: datetime,
        audit: AuditRecord | None = None,
    ) -> StoredDocument | None:
        """Return a document with retained bytes to Pending with attempts reset; None otherwise.

        ``audit`` is held in the same transaction when the document is requeued."""
        row = await self._act(
            self._q(
                "UPDATE {d} SET state = 'pending', attempts = 0, locked_by = NULL,"
                " lease_until = NULL, updated_at = %(now)s"
                " WHERE id = %(id)s AND tenant_id = %(tenant)s AND deleted_at IS NULL"
                " AND data IS NOT NULL AND state <> 'processing'"
                " RETURNING {cols}"
            ),
            {"id": document_id, "tenant": tenant_id, "now": now},
            None if audit is None else (lambda _: audit),
        )
        return stored_document(row) if row else None

    async def soft_delete(
        self,
        tenant_id: str,
        document_id: str,
        *,
        now: datetime,
        audit: AuditRecord | None = None,
    ) -> bool:
        """Mark the document deleted and erase its content, leaving a tombstone row.

        One transaction flags the row, empties its content columns (original bytes,
        extracted text, the content hash, findings, the reserved edit columns), deletes its
        segments (their ``tsvector`` with them) and moves ``claim_seq``, so a worker
        extracting it cannot write anything back; ``audit`` is held in it. The row lock the
        ``UPDATE`` takes orders it against a concurrent ``complete``: either the completion
        committed first and its segments are deleted here, or it re-checks the fence after
        this commit and writes nothing. The replaced row versions (and the hash's entry in
        the duplicate rule's partial index) stay on disk as dead tuples until VACUUM.
        """
        row = await self._act(
            self._q(
                "UPDATE {d} SET deleted_at = %(now)s, updated_at = %(now)s, data = NULL,"
                " bytes_retained = false, text = NULL, sha256 = '', findings = '[]'::jsonb,"
                " segment_count = 0, previous_content = NULL, edit_reason = NULL,"
                " claim_seq = claim_seq + 1, locked_by = NULL, lease_until = NULL"
                " WHERE id = %(id)s AND tenant_id = %(tenant)s AND deleted_at IS NULL"
                " RETURNING id"
            ),
            {"id": document_id, "tenant": tenant_id, "now": now},
            None if audit is None else (lambda _: audit),
            then=self._q("DELETE FROM {s} WHERE document_id = %(id)s AND tenant_id = %(tenant)s"),
        )
        return row is not None

    # -- the audit outbox ------------------------------------------------------------------

    async def pending_audit(self) -> builtins.list[AuditRecord]:
        """Every held audit record, every tenant's, in the order the actions were applied
        (rows set aside, or this version cannot decode, left out)."""
        return await held_records(self._pool, self._outbox, f"{_CLAIM_LOCK}:{self._schema}")

    async def settle_audit(self, correlation_id: str) -> None:
        """Delete the oldest held record with ``correlation_id`` (the audit sink has it)."""
        async with self._pool.connection() as conn:
            await conn.execute(
                self._q(
                    "DELETE FROM {o} WHERE seq ="
                    " (SELECT min(seq) FROM {o} WHERE correlation_id = %(id)s)"
                ),
                {"id": scrub(correlation_id)},
            )

    def claim_audit(self) -> AbstractAsyncContextManager[AuditRecord | None]:
        """The oldest held record while the block runs, deleted when it completes (``None``:
        nothing held, or another host or handle is forwarding)."""
        return claim_held_record(self._pool, self._outbox, f"{_CLAIM_LOCK}:{self._schema}")

    async def original(self, tenant_id: str, document_id: str) -> bytes | None:
        """The retained original bytes of a non-deleted document (authorization is the caller's)."""
        row = await self._one(
            self._q(
                "SELECT data FROM {d} WHERE id = %(id)s AND tenant_id = %(tenant)s"
                " AND deleted_at IS NULL"
            ),
            {"id": document_id, "tenant": tenant_id},
        )
        if row is None or row["data"] is None:
            return None
        return bytes(row["data"])

    async def text(
        self, tenant_id: str, document_id: str, *, scopes: Collection[str]
    ) -> str | None:
        """The text of an Indexed, non-deleted document within ``scopes``, from its segments."""
        params = {"id": document_id, "tenant": tenant_id, "scopes": list(scopes)}
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                self._q(
                    "SELECT s.body FROM {d} AS d LEFT JOIN {s} AS s"
                    " ON s.document_id = d.id AND s.tenant_id = d.tenant_id"
                    " WHERE d.id = %(id)s AND d.tenant_id = %(tenant)s AND d.deleted_at IS NULL"
                    " AND d.state = 'indexed' AND d.scope = ANY(%(scopes)s)"
                    " ORDER BY s.ordinal"
                ),
                params,
            )
            rows = await cursor.fetchall()
        if not rows:
            return None
        return "".join(str(row[0]) for row in rows if row[0] is not None)

    async def segments(self, tenant_id: str, document_id: str) -> Sequence[tuple[int, str, str]]:
        """(ordinal, label, body) of a document's stored segments, in order (for inspection)."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                self._q(
                    "SELECT ordinal, label, body FROM {s} WHERE document_id = %(id)s"
                    " AND tenant_id = %(tenant)s ORDER BY ordinal"
                ),
                {"id": document_id, "tenant": tenant_id},
            )
            return [(int(o), str(lbl), str(b)) for o, lbl, b in await cursor.fetchall()]
