"""Signed validation evidence and everything needed to decide whether it counts.

Nothing here is counted or shown as verified unless the ingest pipeline
(``evidence_app.services.ingest.evidence_ingest``) passed every step; failed uploads leave only an
``UploadLog`` row.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from evidence_app.json_shapes import Certificate, CheckResults, Predicate, StoredCommand, Transcript
from evidence_app.services.versions import INVALID_KEY, supported_range
from recipes_app.models import Recipe


class Role(models.TextChoices):
    CONTRIBUTOR = "contributor", "Contributor (uploads and withdraws own evidence)"
    AUDITOR = "auditor", "Auditor (reads and exports everything)"
    MAINTAINER = "maintainer", "Maintainer (keys, trust roots, allowlist, clusters)"


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True, user__is_active=True)


class ApiToken(models.Model):
    """A bearer token. Only its sha256 is stored; the token itself is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    role = models.CharField(max_length=20, choices=Role.choices)
    prefix = models.CharField(max_length=16, unique=True, help_text="Public part, for lookup.")
    key_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user}, {self.role})"


class TrustRootQuerySet(models.QuerySet["TrustRoot"]):
    def enabled(self) -> TrustRootQuerySet:
        return self.filter(enabled=True).order_by("-is_production", "name")


class TrustRoot(models.Model):
    """A Sigstore trusted_root.json keyless bundles are verified against (offline, no TUF)."""

    name = models.CharField(max_length=100, unique=True)
    trusted_root_json = models.TextField()
    sha256 = models.CharField(max_length=64, blank=True, help_text="sha256 of the JSON text.")
    is_production = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    accepted_issuers = models.TextField(
        blank=True,
        help_text=(
            "OIDC issuers (one per line) this root's certificate authority issues identities "
            "for, e.g. a private Fulcio's own identity provider. Added to the accepted issuers."
        ),
    )
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    added_at = models.DateTimeField(auto_now_add=True)

    objects = TrustRootQuerySet.as_manager()

    def __str__(self) -> str:
        return self.name

    @property
    def issuer_list(self) -> list[str]:
        return [line.strip() for line in self.accepted_issuers.splitlines() if line.strip()]


class SigningKeyQuerySet(models.QuerySet["SigningKey"]):
    def active(self) -> SigningKeyQuerySet:
        return self.filter(revoked_at__isnull=True)


class SigningKey(models.Model):
    """A maintainer-registered public key; key-signed evidence counts only with one of these."""

    name = models.CharField(max_length=200)
    public_key_pem = models.TextField()
    fingerprint = models.CharField(
        max_length=64, unique=True, help_text="sha256 of the DER SubjectPublicKeyInfo."
    )
    algorithm = models.CharField(max_length=30)
    is_demo = models.BooleanField(default=False, help_text="Made by the demo seeder.")
    registered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    registered_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = SigningKeyQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.name} ({self.fingerprint[:16]})"


class AllowlistQuerySet(models.QuerySet["Allowlist"]):
    def in_force(self) -> Allowlist | None:
        return self.order_by("-created_at", "-pk").first()


class Allowlist(models.Model):
    """One version of the signer allowlist, in AICR's ``allowlist.yaml`` format.

    Versions are append-only: the newest is in force, older ones are the history.
    """

    body = models.TextField()
    note = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AllowlistQuerySet.as_manager()

    def __str__(self) -> str:
        return f"allowlist #{self.pk} ({self.created_at:%Y-%m-%d %H:%M})"


class AcceptedIssuer(models.Model):
    """An OIDC issuer a maintainer accepts for keyless signatures, beyond the settings' list,
    the allowlist's issuers and private roots' issuers (e.g. a GitHub Enterprise Server's
    ``https://token.actions.githubusercontent.com/<enterprise>``).

    A valid signature from an issuer accepted nowhere is reported (never counted); once its
    issuer is accepted, its signer is classified by the allowlist like any other.
    """

    issuer = models.CharField(max_length=1000, unique=True, help_text="The exact issuer URL.")
    note = models.CharField(max_length=500, blank=True, help_text="Why it is accepted.")
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["issuer"]

    def __str__(self) -> str:
        return self.issuer


class SignerKind(models.TextChoices):
    KEYLESS = "keyless", "Keyless (Sigstore certificate)"
    KEY = "key", "Key-signed"


class SignerClass(models.TextChoices):
    FIRST_PARTY = "first-party", "First-party"
    PARTNER = "partner", "Partner"
    COMMUNITY = "community", "Community"
    REGISTERED_KEY = "registered-key", "Registered key"
    REPORTED = "reported", "Reported (verified, not allowlisted)"


class SignerQuerySet(models.QuerySet["Signer"]):
    def counted(self) -> SignerQuerySet:
        return self.filter(counted=True)


class Signer(models.Model):
    """A verified signing identity: a certificate's (issuer, identity), or a public key."""

    kind = models.CharField(max_length=10, choices=SignerKind.choices)
    issuer = models.CharField(max_length=1000, blank=True)
    identity = models.CharField(max_length=4000, blank=True)
    key = models.ForeignKey(SigningKey, null=True, blank=True, on_delete=models.PROTECT)
    source_id = models.CharField(
        max_length=64,
        unique=True,
        help_text="sha256(issuer + '\\n' + identity), or of the key fingerprint for keys.",
    )
    slug = models.CharField(max_length=32, unique=True, help_text="First 32 hex of source_id.")
    signer_class = models.CharField(max_length=20, choices=SignerClass.choices)
    counted = models.BooleanField(default=False, help_text="Allowlisted or a registered key.")
    label = models.CharField(max_length=200)
    first_seen = models.DateTimeField(auto_now_add=True)

    objects = SignerQuerySet.as_manager()

    class Meta:
        ordering = ["label", "pk"]
        indexes = [models.Index(fields=["signer_class"])]

    def __str__(self) -> str:
        return self.label


class SignerClassChange(models.Model):
    """History: why a signer's class or counting changed (allowlist edit, key revoked, …)."""

    signer = models.ForeignKey(Signer, on_delete=models.CASCADE, related_name="class_changes")
    from_class = models.CharField(max_length=20, blank=True)
    to_class = models.CharField(max_length=20)
    from_counted = models.BooleanField(null=True)
    to_counted = models.BooleanField()
    allowlist = models.ForeignKey(Allowlist, null=True, blank=True, on_delete=models.SET_NULL)
    reason = models.CharField(max_length=500)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"{self.signer}: {self.from_class or '-'} → {self.to_class} ({self.reason})"


class Container(models.TextChoices):
    BUNDLE = "bundle", "Sigstore bundle"
    SUMMARY_BUNDLE = "summary-bundle", "AICR evidence directory (tarball)"
    OCI = "oci", "OCI artifact pulled by digest"


class Verdict(models.TextChoices):
    VERIFIED = "verified", "Verified"
    INVALID = "invalid", "Invalid"
    UNSUPPORTED = "unsupported", "Unsupported format"
    REJECTED = "rejected", "Rejected"


def supported_range_q(field: str = "aicr_version_key") -> Q:
    """The supported AICR range (``AICR_SUPPORTED_RANGE``) on the version key ``field``, in
    SQL: ``SupportedRange.contains`` (a non-release, key "0" or "", is outside every
    non-empty range). An empty range: every row."""
    supported = supported_range()
    if not supported.enabled:
        return Q()
    condition = ~Q(**{f"{field}__in": ["", INVALID_KEY]})
    lookup = {">=": "gte", ">": "gt", "<=": "lte", "<": "lt", "==": "exact"}
    for bound in supported.bounds:
        condition &= Q(**{f"{field}__{lookup[bound.op]}": bound.key})
    return condition


def counted_q(prefix: str = "", *, signer: str = "signer__") -> Q:
    """What consensus counts: verified, not withdrawn, from a counted signer, on real hardware
    (not a simulated cluster), made with an AICR version in the supported range. One
    condition for querysets (``counted()``) and aggregates alike; ``prefix`` reaches the
    evidence and ``signer`` its signer through relations (from a signer: ``"evidence__"`` and
    ``""``). ``consensus.is_counted`` is the same rule for one loaded row."""
    return Q(
        **{
            f"{prefix}verdict": Verdict.VERIFIED,
            f"{prefix}withdrawn_at__isnull": True,
            f"{signer}counted": True,
            f"{prefix}is_simulated": False,
        }
    ) & supported_range_q(f"{prefix}aicr_version_key")


class EvidenceQuerySet(models.QuerySet["Evidence"]):
    def counted(self) -> EvidenceQuerySet:
        """What consensus counts: verified, not withdrawn, counted signer, real hardware, in
        the supported AICR range (``counted_q``)."""
        return self.filter(counted_q())

    def for_listing(self) -> EvidenceQuerySet:
        """Rows for lists: the signer and recipe joined, the stored bytes left in the database."""
        return self.select_related("signer", "recipe").defer(
            "content", "artifact", "transcript", "certificate", "verify_commands"
        )


class Evidence(models.Model):
    """One signed statement by one signer, with the bytes of its first upload.

    Identity: ``(signer, payload_sha256)``, the sha256 of the DSSE payload (the signed in-toto
    statement bytes) and the verified signer (``Signer.source_id``: the certificate's issuer
    and identity, or the registered key's fingerprint). Another wrapper of the same statement
    (re-indented bundle JSON, a re-compressed or re-tarred evidence directory, an OCI copy, a
    new certificate for the same identity) is the same evidence. ``sha256`` addresses the
    stored bytes (the first upload's).
    """

    sha256 = models.CharField(max_length=64, unique=True)
    payload_sha256 = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text=(
            "sha256 of the signed DSSE payload (the in-toto statement bytes); with the signer, "
            "the identity of this evidence. Empty only for a duplicate withdrawn by migration 0005."
        ),
    )
    content = models.BinaryField()
    size = models.PositiveIntegerField()
    container = models.CharField(max_length=20, choices=Container.choices)
    media_type = models.CharField(max_length=100)
    artifact = models.BinaryField(null=True, blank=True)
    oci_ref = models.CharField(max_length=500, blank=True)
    verdict = models.CharField(max_length=20, choices=Verdict.choices)
    transcript: models.JSONField[Transcript, Transcript] = models.JSONField()
    signer = models.ForeignKey(Signer, on_delete=models.PROTECT, related_name="evidence")
    recipe = models.ForeignKey(
        Recipe,
        on_delete=models.PROTECT,
        related_name="evidence",
        help_text="The recipe whose digest the subject names (possibly an older catalog's).",
    )
    recipe_name = models.CharField(max_length=200, db_index=True)
    subject_digest = models.CharField(max_length=64, db_index=True)
    predicate_type = models.CharField(max_length=200)
    aicr_version = models.CharField(max_length=100, blank=True)
    aicr_version_key = models.CharField(
        max_length=600,
        blank=True,
        help_text="Digits-only sort key of aicr_version (Go semver order; see services.versions).",
    )
    validator_catalog_version = models.CharField(max_length=100, blank=True)
    validator_catalog_version_key = models.CharField(max_length=600, blank=True)
    k8s_version = models.CharField(max_length=100, blank=True)
    identity: models.JSONField[dict[str, str | None], dict[str, str | None]] = models.JSONField(
        default=dict,
        blank=True,
        help_text=(
            "The identity tuple the evidence ran on (coverage.identity.IDENTITIES, None where "
            "the bundle does not record one), read from the stored bytes at ingest."
        ),
    )
    identities: models.JSONField[dict[str, Any], dict[str, Any]] = models.JSONField(
        default=dict,
        blank=True,
        help_text=(
            "Every identity the bundle records, each with its source (predicate, snapshot, "
            "BOM, CTRF, recipe) and state (recorded, redacted, not-recorded), and the images "
            "it names (coverage.recorded), read from the stored bytes at ingest."
        ),
    )
    # Derived from the two above at ingest, so /check/ decodes one record's identities per
    # distinct tuple instead of every record's ('' for a row stored before: read in full).
    identity_key = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="sha256 of the tuple /check/ compares (coverage.stored.identity_key).",
    )
    gpu_model = models.CharField(
        max_length=200, blank=True, help_text="identity['gpu_model'], a column to sort on."
    )
    gpu_count = models.PositiveIntegerField(
        null=True, blank=True, help_text="identity['gpu_count'] as a number, to sort on."
    )
    attested_at = models.DateTimeField()
    predicate: models.JSONField[Predicate, Predicate] = models.JSONField()
    check_results: models.JSONField[CheckResults, CheckResults] = models.JSONField(
        default=dict, help_text="Per phase, per check results read from CTRF (tarballs only)."
    )
    certificate: models.JSONField[Certificate, Certificate] = models.JSONField(
        default=dict, help_text="Verified certificate claims."
    )
    rekor_log_index = models.BigIntegerField(null=True, blank=True)
    integrated_time = models.DateTimeField(
        null=True, blank=True, help_text="Verified signing time (Rekor v1 or TSA)."
    )
    trusted_root_name = models.CharField(
        max_length=100, blank=True, help_text="The trusted root that verified it (keyless)."
    )
    verify_commands: models.JSONField[list[StoredCommand], list[StoredCommand]] = models.JSONField(
        default=list, help_text="[{tool, text, note}] built from verified values only."
    )
    is_demo = models.BooleanField(default=False)
    is_simulated = models.BooleanField(default=False)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="uploaded_evidence",
    )
    uploaded_at = models.DateTimeField(auto_now_add=True)
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    withdrawn_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="withdrawn_evidence",
    )
    withdrawal_reason = models.CharField(max_length=1000, blank=True)

    objects = EvidenceQuerySet.as_manager()

    class Meta:
        ordering = ["-attested_at", "-pk"]
        indexes = [
            # The evidence list's order (``-attested_at, -id``) and the home page's newest
            # uploads, from an index: at 1,000,000 rows both were a parallel sequential scan
            # and a sort for 25 rows (issue 22).
            models.Index(fields=["-attested_at", "-id"], name="evidence_attested_order_idx"),
            models.Index(fields=["-uploaded_at", "-id"], name="evidence_uploaded_order_idx"),
            models.Index(fields=["recipe_name", "signer", "-attested_at"]),
            models.Index(fields=["signer", "-attested_at"]),
            models.Index(fields=["recipe_name", "aicr_version_key"]),
            models.Index(fields=["verdict", "-attested_at"]),
            models.Index(fields=["gpu_model", "gpu_count"]),
            # The newest live run of each (recipe, signer) and the AICR versions of a recipe's
            # live runs, from the index alone (consensus.badges.recipe_badges_computed and the
            # staleness facts behind each stored badge, refreshed at every counted ingest).
            models.Index(
                fields=["recipe_name", "signer", "-attested_at", "-id", "aicr_version"],
                condition=Q(verdict="verified", withdrawn_at__isnull=True, is_simulated=False),
                name="evidence_live_latest_idx",
            ),
            # The newest AICR release of a recipe's live runs, one backward probe per name
            # (services.staleness.newest_counted_releases): the signer and version come from
            # the index (key columns, not INCLUDE: SQLite has none), only the signer's
            # ``counted`` from its row.
            models.Index(
                fields=["recipe_name", "-aicr_version_key", "signer", "aicr_version"],
                condition=Q(verdict="verified", withdrawn_at__isnull=True, is_simulated=False),
                name="evidence_live_newest_aicr_idx",
            ),
            # The (recipe, GPU model) pairs of verified live rows, one index probe each: the
            # qualifications page's filter choices (qualifications.listing, PostgreSQL).
            models.Index(
                fields=["recipe", "gpu_model"],
                condition=Q(verdict="verified", withdrawn_at__isnull=True),
                name="evidence_recipe_gpu_idx",
            ),
            # The newest withdrawals: the publication's version
            # (exports.publication.evidence_version) and the feed's withdrawn entries.
            models.Index(
                fields=["-withdrawn_at", "-id"],
                condition=Q(withdrawn_at__isnull=False),
                name="evidence_withdrawn_idx",
            ),
            # The recipe page (consensus.grid, issue 22): a recipe's newest records, and its
            # newest withdrawn ones and their count, from one end of an index each instead of
            # ranking every record of the recipe (289 ms at 1,000,000).
            models.Index(
                fields=["recipe_name", "-attested_at", "-id"],
                name="evidence_recipe_newest_idx",
            ),
            models.Index(
                fields=["recipe_name", "-attested_at", "-id"],
                condition=Q(withdrawn_at__isnull=False),
                name="evidence_recipe_withdrawn_idx",
            ),
            # The AICR versions of a recipe's eligible runs (``rules.eligible``: simulated
            # ones too) and each one's newest run: a skip scan, one probe per version
            # (consensus.grid._lens, PostgreSQL), instead of grouping the recipe's records.
            models.Index(
                fields=["recipe_name", "aicr_version", "attested_at"],
                condition=Q(verdict="verified", withdrawn_at__isnull=True),
                name="evidence_recipe_versions_idx",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(withdrawn_at__isnull=True) | ~Q(withdrawal_reason=""),
                name="evidence_withdrawal_has_reason",
            ),
            # One record per signed statement and signer, whatever wrapper carried it.
            models.UniqueConstraint(
                fields=["signer", "payload_sha256"],
                condition=~Q(payload_sha256=""),
                name="evidence_one_per_statement_signer",
            ),
        ]

    def __str__(self) -> str:
        return f"evidence {self.sha256[:12]} for {self.recipe_name}"


class SignerTally(models.Model):
    """Per signer and AICR version key: how many evidence records it has, how many of them
    are live (verified, not withdrawn, not simulated) and its newest upload. Maintained by the
    services that change evidence (``services.signer_tallies``: ingest adds, a withdrawal
    moves one record out of ``live``), so ``/signers/`` and the home page read at most a few
    rows per signer instead of grouping every evidence row per request. What consensus counts
    of a signer is ``live`` over the supported range's keys while the signer counts: both
    the range (a setting) and the signer's counting are applied when read, never stored.
    """

    signer = models.ForeignKey(Signer, on_delete=models.CASCADE, related_name="tallies")
    aicr_version_key = models.CharField(max_length=600, blank=True)
    records = models.PositiveIntegerField(default=0)
    live = models.PositiveIntegerField(default=0)
    last_uploaded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["signer", "aicr_version_key"], name="signer_tally_one_per_version"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.signer_id} @ {self.aicr_version_key or '-'}: {self.records}"


class SignerActivity(models.Model):
    """Per signer: its evidence records and newest upload, kept by the same triggers as
    ``SignerTally`` (one row per signer, so ``/signers/`` orders every signer by its newest
    upload from this row instead of grouping its tallies)."""

    signer = models.OneToOneField(
        Signer, on_delete=models.CASCADE, primary_key=True, related_name="activity"
    )
    records = models.PositiveIntegerField(default=0)
    last_uploaded_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.signer_id}: {self.records}"


# The ``verdict`` of a facet tally row that counts every verdict (the "any" option).
ANY_VERDICT = ""


class FacetTally(models.Model):
    """Per recipe name, signer and verdict: how many evidence records there are (and, under
    ``verdict=""``, the same for every verdict). Kept by database triggers on the evidence
    table like ``SignerTally`` (migration 0015), so the evidence list's filter options read a
    signer's or a recipe's counts, and the top signers of a recipe from one end of an index,
    instead of grouping every evidence row per request (issue 22). Rows left at 0 stay."""

    recipe_name = models.CharField(max_length=200)
    signer = models.ForeignKey(Signer, on_delete=models.CASCADE, related_name="facets")
    verdict = models.CharField(max_length=20, blank=True)
    records = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["recipe_name", "signer", "verdict"], name="facet_tally_one_per_key"
            ),
        ]
        indexes = [
            # A recipe's signers with most records (``WHERE recipe_name, verdict ORDER BY
            # records DESC LIMIT n``), and one signer's recipes and verdicts.
            models.Index(
                fields=["recipe_name", "verdict", "-records", "signer"],
                name="facet_tally_top_signers_idx",
            ),
            models.Index(fields=["signer", "verdict"], name="facet_tally_signer_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.recipe_name} / {self.signer_id} / {self.verdict or 'any'}: {self.records}"


# A recipe's facet tally is split in this many rows per verdict, a record going to the
# stripe of its signer's id: two uploads of one recipe by two signers at once then add to
# different rows (one row per recipe made every upload of a recipe wait for the one before
# it to commit), and a read sums at most this many rows per recipe and verdict.
RECIPE_FACET_STRIPES = 64


class RecipeFacetTally(models.Model):
    """Per recipe name, verdict (``""``: every verdict) and stripe (``signer id %
    RECIPE_FACET_STRIPES``), its evidence records: summed over the stripes, the recipe
    options, the verdict options and the totals when no signer is chosen (at most
    RECIPE_FACET_STRIPES rows per recipe name and verdict). Same triggers as ``FacetTally``."""

    recipe_name = models.CharField(max_length=200)
    verdict = models.CharField(max_length=20, blank=True)
    stripe = models.PositiveSmallIntegerField(default=0)
    records = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["recipe_name", "stripe", "verdict"], name="recipe_facet_tally_one_per_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.recipe_name} / {self.verdict or 'any'} / {self.stripe}: {self.records}"


class SignerFacetTally(models.Model):
    """Per signer and verdict (``""``: every verdict), its evidence records: the signer
    options when no recipe is chosen, the signers with most records from one end of
    an index. Same triggers as ``FacetTally``."""

    signer = models.ForeignKey(Signer, on_delete=models.CASCADE, related_name="verdict_facets")
    verdict = models.CharField(max_length=20, blank=True)
    records = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["signer", "verdict"], name="signer_facet_tally_one_per_key"
            ),
        ]
        indexes = [
            models.Index(fields=["verdict", "-records", "signer"], name="signer_facet_top_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.signer_id} / {self.verdict or 'any'}: {self.records}"


class ColumnSlot(models.TextChoices):
    """Which of a signer's grid columns a run is for (``consensus.grid``'s partition)."""

    SUPPORTED = "", "in the supported AICR range"
    UNSUPPORTED = "unsupported", "outside the supported AICR range"
    SIMULATED = "simulated", "simulated"


class ConsensusColumn(models.Model):
    """One signer column of a recipe name's consensus grid in a lens (the default one, or one
    AICR version's): the newest eligible run (verified, not withdrawn; of that version) of
    that signer and slot, with what consensus reads of it. Kept by ``consensus.columns`` in
    the services that change evidence, under the consensus locks, with the row tallies it
    adds to (``ConsensusRowTally``); the recipe page reads the shown columns and the tallies
    instead of every signer's newest run (issue 22)."""

    recipe_name = models.CharField(max_length=200)
    # "" the default lens (each column's newest run), else the AICR version of a version lens.
    lens = models.CharField(max_length=200, blank=True)
    signer = models.ForeignKey(Signer, on_delete=models.CASCADE, related_name="+")
    slot = models.CharField(max_length=12, blank=True, choices=ColumnSlot.choices)
    evidence = models.ForeignKey(Evidence, on_delete=models.CASCADE, related_name="+")
    attested_at = models.DateTimeField()
    counted = models.BooleanField(help_text="``is_counted`` of the run when written.")
    demo = models.BooleanField(default=False)
    # Phase → CTRF name → raw status, the grid's phases only (``rules.check_statuses``).
    statuses = models.JSONField(default=dict)
    # A counted run's stale reason codes when written, comma-joined in ``CODES`` order
    # (uncounted runs: none; they feed no stale count). Refreshed where staleness moves.
    stale_codes = models.CharField(max_length=300, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["recipe_name", "lens", "signer", "slot"],
                name="consensus_column_one_per_slot",
            ),
        ]
        indexes = [
            # The newest columns of a group (counted first) and the counts per group.
            models.Index(
                fields=["recipe_name", "lens", "counted", "slot", "-attested_at", "-evidence"],
                name="consensus_column_newest_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.recipe_name} / {self.signer_id} / {self.slot or 'supported'}"


class ConsensusRowTally(models.Model):
    """Per recipe name, lens and grid row (phase, CTRF name): ``rules.RowTally`` over the
    name's ``ConsensusColumn`` rows in that lens, the counts its state is computed from. A row
    no column carries is deleted."""

    recipe_name = models.CharField(max_length=200)
    lens = models.CharField(max_length=200, blank=True)
    phase = models.CharField(max_length=20)
    # A CTRF name is whatever a signer sent (any length the bounded parser lets through), so
    # the row is keyed by its digest (``columns.name_key``): an index entry has a size limit.
    name = models.TextField()
    name_key = models.CharField(max_length=64)
    pass_counted = models.IntegerField(default=0)
    fail_counted = models.IntegerField(default=0)
    reported = models.IntegerField(default=0)
    counted_carriers = models.IntegerField(default=0)
    other_carriers = models.IntegerField(default=0)
    demo_voters = models.IntegerField(default=0)
    stale_voters = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["recipe_name", "lens", "phase", "name_key"],
                name="consensus_row_tally_one_per_row",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.recipe_name} / {self.phase} / {self.name}"


class ConsensusName(models.Model):
    """A recipe name whose columns and row tallies are built, with the newest AICR release its
    counted columns' staleness was judged against: when that moves (a newer counted release,
    or the newest one withdrawn), every column's "aicr-outdated" is judged again."""

    recipe_name = models.CharField(max_length=200, unique=True)
    newest_aicr = models.CharField(max_length=200, blank=True)

    def __str__(self) -> str:
        return self.recipe_name


class UploadState(models.TextChoices):
    PENDING = "pending", "Waiting for a worker"
    RUNNING = "running", "Being pulled and verified"
    DONE = "done", "Done"


class UploadOutcome(models.TextChoices):
    """What became of an upload, in the domain's words (the views map it to an HTTP status)."""

    CREATED = "created", "Stored: a new record"
    EXISTING = "existing", "Already known: answered with the stored record"
    REFUSED = "refused", "Refused: not verified evidence"
    TOO_LARGE = "too_large", "Refused: over the size limit"
    BUSY = "busy", "Not decided: the database could not take it; retry"


class UploadLog(models.Model):
    """Every upload attempt and its outcome; the only trace a failed upload leaves.

    Direct uploads are written once, ``done``. An OCI reference, or a bundle sent with
    ``Prefer: respond-async`` (its bytes in ``QueuedBundle``), is written ``pending`` by the web
    process and completed by an ``ingest`` worker (``pending`` → ``running`` → ``done``).
    """

    at = models.DateTimeField(auto_now_add=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    channel = models.CharField(max_length=10)  # "form", "api", "oci", "seed", "run"
    state = models.CharField(max_length=10, choices=UploadState.choices, default=UploadState.DONE)
    oci_ref = models.CharField(max_length=500, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    claimed_at = models.DateTimeField(
        null=True, blank=True, help_text="When a worker last claimed it (its lease starts)."
    )
    sha256 = models.CharField(max_length=64, blank=True)
    size = models.PositiveIntegerField(default=0)
    filename = models.CharField(max_length=255, blank=True)
    verdict = models.CharField(max_length=20, choices=Verdict.choices, blank=True)
    failed_step = models.CharField(max_length=20, blank=True)
    reason = models.TextField(blank=True)
    transcript: models.JSONField[Transcript, Transcript] = models.JSONField(default=list)
    signer = models.JSONField(default=dict, help_text="Summary of the verified signer, if any.")
    created = models.BooleanField(null=True, help_text="True: a new record; False: known bytes.")
    outcome = models.CharField(
        max_length=10,
        choices=UploadOutcome.choices,
        blank=True,
        help_text="Blank while an OCI upload waits for its worker.",
    )
    # Deprecated, no longer written: read ``outcome``. Kept through one release so processes of
    # the previous one can still write it while they drain; the next release's migration drops it.
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    evidence = models.ForeignKey(Evidence, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"upload {self.sha256[:12] or '-'}: {self.verdict}"


class QueuedBundle(models.Model):
    """The bytes of an upload sent with ``Prefer: respond-async``, kept until an ``ingest``
    worker gives it an outcome (``services.ingest.queued``); then deleted. The upload's
    ``UploadLog`` is ``pending`` meanwhile, and its status URL says so."""

    upload = models.OneToOneField(
        UploadLog, primary_key=True, on_delete=models.CASCADE, related_name="queued_bundle"
    )
    data = models.BinaryField()
    artifact = models.BinaryField(null=True, blank=True)

    def __str__(self) -> str:
        return f"queued bytes of upload {self.upload_id}"


class PointerState(models.TextChoices):
    PENDING = "pending", "Pending: not pulled and verified yet (never counted)"
    INGESTED = "ingested", "Ingested: its bundle was pulled, verified and linked"
    REFUSED = "refused", "Refused: breaks the pointer contract or its bundle failed"


class EvidencePointerQuerySet(models.QuerySet["EvidencePointer"]):
    def due(self, *, now: Any) -> EvidencePointerQuerySet:
        """Pending pointers whose next try has come (the beat retry's work)."""
        return self.filter(state=PointerState.PENDING, next_try__lte=now)


class EvidencePointer(models.Model):
    """One pointer file of an AICR tree (``recipes/evidence/…``): what it claims, and what this
    site made of it. A pointer is a locator, never evidence: only the ``Evidence`` its bundle
    became (pulled by digest, verified by ``evidence_ingest``) can count."""

    path = models.CharField(
        max_length=1000, unique=True, help_text="recipes/evidence/… inside the AICR tree."
    )
    content_sha256 = models.CharField(max_length=64, help_text="sha256 of the file as imported.")
    allowlist_sha256 = models.CharField(
        max_length=64, blank=True, help_text="sha256 of the tree allowlist it was checked against."
    )
    recipe = models.CharField(max_length=200, blank=True, db_index=True)
    profile = models.CharField(max_length=200, blank=True)
    signer_identity = models.CharField(max_length=4000, blank=True)
    signer_issuer = models.CharField(max_length=1000, blank=True)
    rekor_log_index = models.BigIntegerField(null=True, blank=True)
    source = models.CharField(max_length=32, blank=True, help_text="Slug of the claimed signer.")
    claimed_class = models.CharField(
        max_length=20, blank=True, help_text="The signer's class in the tree's allowlist."
    )
    predicate_type = models.CharField(max_length=200, blank=True)
    oci = models.CharField(max_length=500, blank=True, help_text="bundle.oci as written.")
    bundle_digest = models.CharField(max_length=71, blank=True)
    attested_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(
        max_length=10, choices=PointerState.choices, default=PointerState.PENDING
    )
    reason = models.CharField(max_length=1000, blank=True)
    tries = models.PositiveIntegerField(default=0)
    last_tried = models.DateTimeField(null=True, blank=True)
    next_try = models.DateTimeField(null=True, blank=True)
    upload = models.ForeignKey(UploadLog, null=True, blank=True, on_delete=models.SET_NULL)
    evidence = models.ForeignKey(
        Evidence, null=True, blank=True, on_delete=models.SET_NULL, related_name="pointers"
    )
    tree_commit = models.CharField(max_length=40, blank=True)
    first_seen = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = EvidencePointerQuerySet.as_manager()

    class Meta:
        ordering = ["recipe", "path"]
        indexes = [models.Index(fields=["state", "next_try"])]
        constraints = [
            # Ingested means linked: the state and its effect are one row write.
            models.CheckConstraint(
                condition=~Q(state="ingested") | Q(evidence__isnull=False),
                name="evidence_pointer_ingested_has_evidence",
            ),
        ]

    def __str__(self) -> str:
        return f"pointer {self.path} ({self.state})"


class PublicationBuild(models.Model):
    """The last built AICR publication (``/aicr/data/``) of one ``include`` choice, made by a
    Celery task (``exports.artefact``), never by a request. ``version`` is
    ``exports.publication.evidence_version`` when the build read the evidence: a request that
    finds another value serves this build, says a rebuild is pending, and asks for one."""

    include = models.CharField(max_length=100, unique=True, blank=True)
    version = models.CharField(max_length=400)
    built_at = models.DateTimeField()
    build_seconds = models.FloatField(default=0)
    runs = models.PositiveIntegerField(default=0)
    left_out: models.JSONField[dict[str, int], dict[str, int]] = models.JSONField(default=dict)

    def __str__(self) -> str:
        return f"publication [{self.include or '-'}] at {self.built_at:%Y-%m-%d %H:%M:%S}"


class PublicationDocument(models.Model):
    """One file of a ``PublicationBuild``: ``index.json``, ``labels.json`` or
    ``series/<recipe>.json``, with the sha256 its ETag is."""

    build = models.ForeignKey(PublicationBuild, on_delete=models.CASCADE, related_name="documents")
    name = models.CharField(max_length=300)
    body = models.BinaryField()
    sha256 = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["build", "name"], name="publication_document_name"),
        ]

    def __str__(self) -> str:
        return self.name


class ExportFormat(models.TextChoices):
    NDJSON = "ndjson", "NDJSON (one record a line)"
    CSV = "csv", "CSV (a spreadsheet)"
    AUDIT = "audit", "Signed offline audit package (tar.gz)"


class ExportState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Building"
    DONE = "done", "Ready to download"
    FAILED = "failed", "Failed"


class ExportJobQuerySet(models.QuerySet["ExportJob"]):
    def active(self) -> ExportJobQuerySet:
        return self.filter(state__in=[ExportState.QUEUED, ExportState.RUNNING])


class ExportJob(models.Model):
    """An export an auditor or maintainer asked for, built by a Celery task
    (``evidence_app.exports.jobs``) into ``ExportChunk`` rows, so any web host serves it and no
    request holds a worker for minutes. ``done`` counts the records written so far (the page's
    progress); the file exists for download only once ``state`` is ``done``, set in the
    transaction that records its size and digest."""

    format = models.CharField(max_length=10, choices=ExportFormat.choices)
    filters: models.JSONField[dict[str, str], dict[str, str]] = models.JSONField(
        default=dict, help_text="The /api/v1/evidence/ filters, as validated when asked for."
    )
    site = models.CharField(max_length=500, help_text="The absolute site URL records link to.")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="export_jobs"
    )
    state = models.CharField(max_length=10, choices=ExportState.choices, default=ExportState.QUEUED)
    total = models.PositiveIntegerField(null=True, blank=True, help_text="Records to write.")
    done = models.PositiveIntegerField(default=0, help_text="Records written so far.")
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    filename = models.CharField(max_length=100, blank=True)
    size = models.BigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    progress_at = models.DateTimeField(null=True, blank=True, help_text="Last progress seen.")
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ExportJobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["requested_by", "-created_at"], name="export_job_owner_idx"),
            models.Index(fields=["finished_at"], name="export_job_finished_idx"),
        ]

    def __str__(self) -> str:
        return f"export #{self.pk} ({self.format}, {self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in (ExportState.QUEUED, ExportState.RUNNING)


class ExportChunk(models.Model):
    """One piece (``EXPORT_CHUNK_BYTES``) of a built export's file, in order of ``seq``."""

    job = models.ForeignKey(ExportJob, on_delete=models.CASCADE, related_name="chunks")
    seq = models.PositiveIntegerField()
    body = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "seq"], name="export_chunk_seq"),
        ]

    def __str__(self) -> str:
        return f"export #{self.job_id} chunk {self.seq}"


class Release(models.Model):
    """What a maintainer declares qualified: an operator release (its image and chart), the
    deployment inputs it ships (the AICR image, the validator images) and the profiles
    (recipes) it claims, each optionally with its hardware/software tuple. Immutable once
    declared: an image rebuild is a new release (AICR's policy: a qualification covers exact
    digests). Whether each profile is qualified is computed by ``evidence_app.releases.status``
    and stored per profile (``ReleaseProfile``), kept current where evidence changes."""

    name = models.CharField(max_length=200, unique=True)
    operator_image = models.CharField(max_length=500, help_text="repo@sha256:<64 hex>.")
    operator_chart = models.CharField(max_length=500, help_text="repo@sha256:<64 hex>.")
    aicr_image = models.CharField(max_length=500, help_text="repo@sha256:<64 hex>.")
    validator_images: models.JSONField[list[dict[str, str]], list[dict[str, str]]] = (
        models.JSONField(default=list, help_text='[{"image": repo, "digest": "sha256:…"}]')
    )
    profiles: models.JSONField[list[dict[str, Any]], list[dict[str, Any]]] = models.JSONField(
        default=list,
        help_text='[{"recipe": name, "tuple": {identity: value}}]: the profiles it claims.',
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"release {self.name}"

    @property
    def claimed(self) -> list[str]:
        return [str(p.get("recipe")) for p in self.profiles]


class ReleaseProfile(models.Model):
    """One claimed profile of a release and its stored status: ``releases.status`` (one
    rule) computed when the release is declared and again, in the same transaction, by the
    services that change what it rests on (ingest, withdrawal, signer re-classification, key
    revocation, catalog import: ``releases.stored``). A status read is one indexed query; the
    row says under which settings and catalog it was computed (``fingerprint``), and a read
    that finds another recomputes it."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="profile_rows")
    position = models.PositiveIntegerField(help_text="Its place in Release.profiles.")
    recipe_name = models.CharField(max_length=200)
    status = models.CharField(max_length=24)
    reason = models.TextField()
    evidence: models.JSONField[list[int], list[int]] = models.JSONField(
        default=list, help_text="The evidence ids the status rests on, best first."
    )
    # Display detail only (never filtered on): the identities the best run does not confirm.
    differences: models.JSONField[list[dict[str, Any]], list[dict[str, Any]]] = models.JSONField(
        default=list, help_text="[{key, label, state, expected, recorded}]"
    )
    examined = models.PositiveIntegerField(default=0, help_text="Candidate runs read.")
    fingerprint = models.CharField(
        max_length=500, help_text="The catalog and settings the status was computed under."
    )
    refreshed_at = models.DateTimeField()

    class Meta:
        ordering = ["release", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["release", "recipe_name"], name="release_profile_recipe"
            ),
        ]
        indexes = [models.Index(fields=["recipe_name"])]

    def __str__(self) -> str:
        return f"{self.release_id}: {self.recipe_name} {self.status}"
