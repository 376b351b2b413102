"""Store a verified upload: its signer, ``Evidence`` and ``UploadLog`` rows in one transaction,
or the record already stored for the same signed statement."""

from __future__ import annotations

import functools
from typing import Any

from django.db import IntegrityError, connection, transaction

from evidence_app.consensus.stored import evidence_stored as refresh_consensus
from evidence_app.coverage.stored import identities_of_stored, identity_columns, identity_key
from evidence_app.exports.artefact import publication_changed
from evidence_app.models import Allowlist, Evidence, Signer, UploadOutcome, Verdict
from evidence_app.services import signers
from evidence_app.services.ingest.result import IngestResult
from evidence_app.services.ingest.rows import column_of, insert_row
from evidence_app.services.ingest.upload_log import Upload, log_upload
from evidence_app.services.signers import SignerDecision
from recipes_app.catalog_values import catalog_values_reader


def _existing(
    fields: dict[str, Any], decision: SignerDecision
) -> tuple[Signer | None, Evidence | None]:
    """The signer's row and its record of this statement (the lookup before storing)."""
    return _known(fields, decision)


def _known(
    fields: dict[str, Any], decision: SignerDecision
) -> tuple[Signer | None, Evidence | None]:
    """One indexed statement: the signer (unique ``source_id``) with the pk of its record of
    this payload (the unique ``(signer, payload_sha256)``). The same bytes are the same
    statement by the same signer, so this finds a byte-identical re-upload too. The record
    itself is read only when there is one (a re-upload)."""
    with connection.cursor() as cursor:
        cursor.execute(_known_sql(), [fields["payload_sha256"], decision.source_id])
        row = cursor.fetchone()
    if row is None:
        return None, None
    *values, known_pk = row
    names = [f.attname for f in Signer._meta.concrete_fields]
    signer = Signer.from_db(connection.alias, names, values)
    if known_pk is None:
        return signer, None
    evidence = Evidence.objects.defer("content", "artifact").get(pk=known_pk)
    evidence.signer = signer
    return signer, evidence


@functools.cache
def _known_sql_for(vendor: str) -> str:
    def col(model: Any, name: str) -> str:
        return connection.ops.quote_name(model._meta.get_field(name).column)

    def table(model: Any) -> str:
        return connection.ops.quote_name(model._meta.db_table)

    s, e = Signer, Evidence
    columns = ", ".join(
        f"{table(s)}.{connection.ops.quote_name(column_of(f))}" for f in s._meta.concrete_fields
    )
    # Identifiers only, quoted, from the models' metadata; the values are parameters. Written
    # out once because the ORM's compilation of this (a correlated subquery) costs more CPU
    # than the database takes to answer it (docs/benchmarks.md).
    return (
        f"SELECT {columns}, (SELECT {table(e)}.{col(e, 'id')} FROM {table(e)} "  # noqa: S608
        f"WHERE {table(e)}.{col(e, 'signer')} = {table(s)}.{col(s, 'id')} "
        f"AND {table(e)}.{col(e, 'payload_sha256')} = %s LIMIT 1) "
        f"FROM {table(s)} WHERE {table(s)}.{col(s, 'source_id')} = %s"
    )


def _known_sql() -> str:
    return _known_sql_for(connection.vendor)


def store_evidence(
    fields: dict[str, Any],
    *,
    decision: SignerDecision,
    allowlist_row: Allowlist | None,
    upload: Upload,
) -> IngestResult:
    """One transaction: signer, ``Evidence`` and ``UploadLog`` rows, or none of them.

    Race: the same statement (in any wrapper) uploaded twice at once. Both see no record; the
    unique ``(signer, payload_sha256)`` (or ``sha256``) decides at the loser's insert, whose
    whole transaction (signer included) rolls back. It then answers with the winner's record in
    a second transaction (no savepoint per upload).
    """
    try:
        with transaction.atomic():
            return _store_once(
                fields, decision=decision, allowlist_row=allowlist_row, upload=upload
            )
    except IntegrityError:
        with transaction.atomic():
            _, evidence = _known(fields, decision)
            if evidence is None:  # the same bytes as a duplicate migration 0005 withdrew
                evidence = (
                    Evidence.objects.select_related("signer")
                    .defer("content", "artifact")
                    .filter(sha256=fields["sha256"])
                    .first()
                )
            if evidence is None:
                raise
            return _stored(evidence, created=False, fields=fields, decision=decision, upload=upload)


def _store_once(
    fields: dict[str, Any],
    *,
    decision: SignerDecision,
    allowlist_row: Allowlist | None,
    upload: Upload,
) -> IngestResult:
    signer, evidence = _existing(fields, decision)
    if evidence is not None:
        return _stored(evidence, created=False, fields=fields, decision=decision, upload=upload)
    if signer is None:  # first seen: created with its first class-history entry
        signer = signers.signer_upsert(decision, allowlist_row=allowlist_row)
    evidence = Evidence(signer=signer, **fields)
    # The identity tuple as columns, in the same row: the qualifications table sorts on them.
    for column, value in identity_columns(evidence).items():
        setattr(evidence, column, value)
    # Every recorded identity with its source and state, once, here: releases and /check/
    # compare the stored record and never re-read the bytes per request.
    catalog_id = evidence.recipe.catalog_id if evidence.recipe_id else None
    evidence.identities = identities_of_stored(
        evidence, read_values=catalog_values_reader(catalog_id)
    )
    evidence.identity_key = identity_key(evidence.identities, evidence.identity)
    insert_row(evidence)
    refresh_consensus(evidence)  # the recipe's stored consensus badge, in this transaction
    publication_changed()  # /aicr/data/ rebuilt by a task after the commit (no statement here)
    return _stored(evidence, created=True, fields=fields, decision=decision, upload=upload)


def _stored(
    evidence: Evidence,
    *,
    created: bool,
    fields: dict[str, Any],
    decision: SignerDecision,
    upload: Upload,
) -> IngestResult:
    signer_row: Signer = evidence.signer
    summary = decision.summary() | {
        "class": signer_row.signer_class,
        "counted": signer_row.counted,
        "label": signer_row.label,
        "slug": signer_row.slug,
    }
    result = IngestResult(
        evidence=evidence,
        created=created,
        verdict=Verdict.VERIFIED,
        failed_step="",
        signer=summary,
        transcript=fields["transcript"],
        reason="" if created else _known_reason(evidence, fields),
        outcome=UploadOutcome.CREATED if created else UploadOutcome.EXISTING,
    )
    return log_upload(result, upload)


def _known_reason(evidence: Evidence, fields: dict[str, Any]) -> str:
    """Why an upload answered with an existing record (and that a withdrawal still holds)."""
    if evidence.sha256 == fields["sha256"]:
        what = "has these exact bytes"
    else:
        what = (
            "is this signed statement by this signer (payload sha256:"
            f"{fields['payload_sha256'][:12]}…), uploaded in another wrapper"
        )
    reason = f"already known: evidence #{evidence.pk} {what}; nothing new was stored"
    if evidence.withdrawn_at is not None:
        reason += (
            f"; it was withdrawn on {evidence.withdrawn_at:%Y-%m-%d %H:%M} UTC "
            f"({evidence.withdrawal_reason}) and stays withdrawn: not counted"
        )
    return reason
