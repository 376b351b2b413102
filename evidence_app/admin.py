"""Maintainers' admin: trusted roots, accepted OIDC issuers, signing keys and allowlist
versions (validated, through the services), plus read-only signers (with class history),
evidence (withdraw action) and the upload log."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from evidence_app import permissions
from evidence_app.corroborate.allowlist import MAX_ALLOWLIST_BYTES
from evidence_app.models import (
    AcceptedIssuer,
    Allowlist,
    ApiToken,
    Evidence,
    EvidencePointer,
    Release,
    Role,
    Signer,
    SignerClassChange,
    SigningKey,
    TrustRoot,
    UploadLog,
)
from evidence_app.releases.declare import ReleaseInputError, release_declare, release_fields
from evidence_app.services import allowlist_sync, keys, pointers, signers, tokens, trust_roots
from evidence_app.services.withdrawal import WithdrawalError, evidence_withdraw
from evidence_app.verification.summary_bundle import SummaryBundleError, read_archive

#: An uploaded pointer tree (AICR's own: ~30 pointers, a few KB each).
POINTER_TREE_MAX_BYTES = 16 * 1024 * 1024


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewable, never edited here: these rows are written by the services only."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def admin_roles(request: HttpRequest) -> set[str]:
    return permissions.roles_of(request.user)


# --- trusted roots ----------------------------------------------------------------------------


class TrustRootForm(forms.ModelForm):
    """Validated by loading the JSON (``services.trust_roots``); saved by the service too."""

    class Meta:
        model = TrustRoot
        fields = ["name", "trusted_root_json", "accepted_issuers", "enabled"]
        widgets = {"trusted_root_json": forms.Textarea(attrs={"rows": 12, "cols": 100})}

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        text = data.get("trusted_root_json")
        if text:
            try:
                trust_roots.trust_root_check(
                    name=data.get("name") or "new root", trusted_root_json=text
                )
            except ValidationError as exc:
                self.add_error("trusted_root_json", exc)
        return data


@admin.register(TrustRoot)
class TrustRootAdmin(admin.ModelAdmin):
    """Private roots are added and changed here; the production root is read-only."""

    form = TrustRootForm
    list_display = ["name", "is_production", "enabled", "short_sha256", "added_at"]
    list_filter = ["enabled", "is_production"]
    readonly_fields = ["sha256", "is_production", "added_by", "added_at"]

    @admin.display(description="sha256")
    def short_sha256(self, obj: TrustRoot) -> str:
        return obj.sha256[:16]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.is_production:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.is_production:
            return False
        return super().has_delete_permission(request, obj)

    def delete_model(self, request: HttpRequest, obj: TrustRoot) -> None:
        trust_roots.trust_root_delete(root=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[TrustRoot]) -> None:
        # The bulk action: never the production root.
        for root in queryset.filter(is_production=False):
            trust_roots.trust_root_delete(root=root)
        if queryset.filter(is_production=True).exists():
            self.message_user(
                request, "The production trusted root cannot be deleted.", messages.WARNING
            )

    def save_model(self, request: HttpRequest, obj: TrustRoot, form: Any, change: bool) -> None:
        data = form.cleaned_data
        fields = {
            "name": data["name"],
            "trusted_root_json": data["trusted_root_json"],
            "accepted_issuers": data.get("accepted_issuers", ""),
            "enabled": data.get("enabled", False),
        }
        if change:
            trust_roots.trust_root_update(root=obj, **fields)
            return
        saved = trust_roots.trust_root_add(**fields, by=request.user)
        obj.pk = saved.pk
        obj.sha256 = saved.sha256
        obj.is_production = saved.is_production
        obj.added_by = saved.added_by
        obj.added_at = saved.added_at


# --- accepted issuers ------------------------------------------------------------------------


class AcceptedIssuerForm(forms.ModelForm):
    class Meta:
        model = AcceptedIssuer
        fields = ["issuer", "note"]

    def clean_issuer(self) -> str:
        return signers.issuer_check(self.cleaned_data.get("issuer", ""))


@admin.register(AcceptedIssuer)
class AcceptedIssuerAdmin(admin.ModelAdmin):
    """OIDC issuers accepted for keyless signatures (e.g. a GitHub Enterprise Server's); added
    through ``services.signers.issuer_accept`` (who and when recorded), removed, never edited."""

    form = AcceptedIssuerForm
    list_display = ["issuer", "note", "added_by", "added_at"]
    readonly_fields = ["added_by", "added_at"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def save_model(
        self, request: HttpRequest, obj: AcceptedIssuer, form: Any, change: bool
    ) -> None:
        data = form.cleaned_data
        saved = signers.issuer_accept(issuer=data["issuer"], note=data["note"], by=request.user)
        obj.pk = saved.pk
        obj.added_by = saved.added_by
        obj.added_at = saved.added_at


# --- signing keys -----------------------------------------------------------------------------


class SigningKeyForm(forms.ModelForm):
    class Meta:
        model = SigningKey
        fields = ["name", "public_key_pem"]
        widgets = {"public_key_pem": forms.Textarea(attrs={"rows": 6, "cols": 70})}
        help_texts = {"public_key_pem": "PEM public key: ECDSA P-256 or Ed25519 only."}

    def clean_name(self) -> str:
        return keys.signing_key_name_check(self.cleaned_data["name"])

    def clean_public_key_pem(self) -> str:
        info = keys.signing_key_check(self.cleaned_data["public_key_pem"])
        return info.pem


@admin.register(SigningKey)
class SigningKeyAdmin(admin.ModelAdmin):
    """Keys are registered through ``services.keys``; afterwards only the name changes."""

    form = SigningKeyForm
    list_display = ["name", "algorithm", "fingerprint", "is_demo", "registered_at", "revoked_at"]
    list_filter = ["algorithm", "is_demo"]
    actions = ["revoke"]

    def get_readonly_fields(self, request: HttpRequest, obj: SigningKey | None = None) -> list[str]:
        common = [
            "fingerprint",
            "algorithm",
            "is_demo",
            "registered_by",
            "registered_at",
            "revoked_at",
        ]
        return ["public_key_pem", *common] if obj is not None else common

    def get_fields(self, request: HttpRequest, obj: SigningKey | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("name", "public_key_pem")
        return (
            "name",
            "public_key_pem",
            "fingerprint",
            "algorithm",
            "is_demo",
            "registered_by",
            "registered_at",
            "revoked_at",
        )

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # signers keep pointing at it; revoke instead

    def save_model(self, request: HttpRequest, obj: SigningKey, form: Any, change: bool) -> None:
        if change:
            obj.save(update_fields=["name"])
            return
        saved = keys.signing_key_register(
            name=form.cleaned_data["name"],
            public_key_pem=form.cleaned_data["public_key_pem"],
            by=request.user,
        )
        obj.pk = saved.pk
        for name in ("public_key_pem", "fingerprint", "algorithm", "is_demo", "registered_at"):
            setattr(obj, name, getattr(saved, name))
        obj.registered_by = saved.registered_by

    @admin.action(
        description="Revoke the selected keys (their evidence stops counting)",
        permissions=["change"],
    )
    def revoke(self, request: HttpRequest, queryset: QuerySet[SigningKey]) -> None:
        for key in queryset:
            keys.signing_key_revoke(key=key, by=request.user)
        self.message_user(request, f"Revoked {queryset.count()} key(s).", messages.SUCCESS)


# --- allowlist versions -----------------------------------------------------------------------


class AllowlistForm(forms.ModelForm):
    class Meta:
        model = Allowlist
        fields = ["body", "note"]
        widgets = {"body": forms.Textarea(attrs={"rows": 30, "cols": 100})}
        help_texts = {
            "body": "AICR allowlist.yaml (schemaVersion 1.0.x; firstParty by anchored "
            "identityPattern, community/partner by 32-hex source slug). Saving publishes a new "
            "version and re-classifies every signer.",
        }

    def clean_body(self) -> str:
        body: str = self.cleaned_data["body"]
        signers.allowlist_parse(body)  # ValidationError with the parser's message
        return body


class AllowlistSyncForm(forms.Form):
    """An AICR tree's allowlist.yaml, pasted or uploaded (never a path on the server)."""

    body = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 20, "cols": 100}),
        help_text="Paste recipes/evidence/allowlist.yaml of an AICR tree …",
    )
    upload = forms.FileField(required=False, help_text="… or upload it.")
    note = forms.CharField(
        required=False, max_length=500, initial="AICR tree allowlist.yaml merged"
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload = data.get("upload")
        if upload is not None:
            raw = upload.read(MAX_ALLOWLIST_BYTES + 1)
            if len(raw) > MAX_ALLOWLIST_BYTES:
                raise ValidationError("The file is larger than an allowlist may be (1 MiB).")
            try:
                data["body"] = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ValidationError("The file is not UTF-8 text.") from None
        if not data.get("body"):
            raise ValidationError("Paste or upload an allowlist.yaml.")
        return data


@admin.register(Allowlist)
class AllowlistAdmin(admin.ModelAdmin):
    """Add-only: each save is a new version; old versions stay as history."""

    form = AllowlistForm
    change_list_template = "admin/evidence_app/allowlist/change_list.html"
    list_display = ["__str__", "note", "created_by", "in_force"]
    readonly_fields = ["created_by", "created_at"]

    @admin.display(boolean=True, description="in force")
    def in_force(self, obj: Allowlist) -> bool:
        current = Allowlist.objects.in_force()
        return current is not None and current.pk == obj.pk

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        current = Allowlist.objects.in_force()
        return {"body": current.body} if current is not None else {}

    def get_urls(self) -> list[URLPattern]:
        sync = path(
            "sync/",
            self.admin_site.admin_view(self.sync_view),
            name="evidence_app_allowlist_sync",
        )
        return [sync, *super().get_urls()]

    def sync_view(self, request: HttpRequest) -> HttpResponse:
        """Paste (or upload) an AICR tree's allowlist.yaml, see the diff, then confirm: the
        merge (the site's own entries kept) is published like a saved version."""
        if not self.has_add_permission(request):
            return HttpResponse("Not allowed to publish allowlist versions.", status=403)
        form = AllowlistSyncForm(request.POST or None, request.FILES or None)
        diff = None
        if request.method == "POST" and form.is_valid():
            body = form.cleaned_data["body"]
            try:
                if request.POST.get("confirm"):
                    diff, row = allowlist_sync.allowlist_apply(
                        tree_body=body, note=form.cleaned_data["note"], by=request.user
                    )
                    if row is None:
                        messages.info(request, "Nothing to publish: no entry would change.")
                    else:
                        self.log_addition(request, row, "Published from an AICR allowlist.yaml")
                        messages.success(request, f"Published allowlist #{row.pk}.")
                        return HttpResponseRedirect(
                            reverse("admin:evidence_app_allowlist_changelist")
                        )
                else:
                    diff = allowlist_sync.allowlist_diff(tree_body=body)
            except ValidationError as exc:
                form.add_error("body", exc)
                diff = None
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Sync from an AICR allowlist.yaml",
            "form": form,
            "diff": diff,
        }
        return TemplateResponse(request, "admin/evidence_app/allowlist/sync.html", context)

    def save_model(self, request: HttpRequest, obj: Allowlist, form: Any, change: bool) -> None:
        published = signers.allowlist_publish(
            body=form.cleaned_data["body"], note=form.cleaned_data.get("note", ""), by=request.user
        )
        obj.pk = published.pk
        obj.created_at = published.created_at
        obj.created_by = published.created_by


# --- signers, evidence, uploads, tokens ------------------------------------------------------


class SignerClassChangeInline(admin.TabularInline):
    model = SignerClassChange
    extra = 0
    can_delete = False
    fields = ("at", "from_class", "to_class", "from_counted", "to_counted", "allowlist", "reason")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Signer)
class SignerAdmin(ReadOnlyAdmin):
    list_display = ["label", "signer_class", "counted", "kind", "slug", "first_seen"]
    list_filter = ["signer_class", "counted", "kind"]
    search_fields = ["label", "identity", "slug"]
    inlines = [SignerClassChangeInline]


class WithdrawActionForm(ActionForm):
    reason = forms.CharField(
        required=False, max_length=1000, label="Reason (for withdraw)", help_text="Required."
    )


@admin.register(Evidence)
class EvidenceAdmin(ReadOnlyAdmin):
    action_form = WithdrawActionForm
    actions = ["withdraw"]
    list_display = [
        "pk",
        "recipe_name",
        "signer",
        "verdict",
        "aicr_version",
        "attested_at",
        "is_demo",
        "is_simulated",
        "withdrawn_at",
    ]
    list_filter = ["verdict", "is_demo", "is_simulated", "container"]
    search_fields = ["recipe_name", "sha256", "signer__label"]
    list_select_related = ["signer"]
    exclude = ["content", "artifact"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Evidence]:
        return super().get_queryset(request).defer("content", "artifact")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Needed for the withdraw action to show; every field stays read-only.
        return obj is None and request.user.has_perm("evidence_app.change_evidence")

    @admin.action(
        description="Withdraw the selected evidence (give a reason)", permissions=["change"]
    )
    def withdraw(self, request: HttpRequest, queryset: QuerySet[Evidence]) -> None:
        reason = request.POST.get("reason", "").strip()
        if not reason:
            self.message_user(request, "A reason is required to withdraw evidence.", messages.ERROR)
            return
        done = 0
        for evidence in queryset:
            try:
                evidence_withdraw(
                    evidence=evidence, by=request.user, roles=admin_roles(request), reason=reason
                )
                done += 1
            except WithdrawalError as exc:
                self.message_user(request, f"#{evidence.pk}: {exc.message}", messages.WARNING)
        if done:
            self.message_user(request, f"Withdrew {done} piece(s) of evidence.", messages.SUCCESS)


@admin.register(UploadLog)
class UploadLogAdmin(ReadOnlyAdmin):
    # ``evidence_id``, not ``evidence``: the list must not load Evidence rows (their bytes).
    list_display = [
        "pk",
        "at",
        "channel",
        "state",
        "outcome",
        "verdict",
        "failed_step",
        "user",
        "evidence_id",
    ]
    list_filter = ["outcome", "verdict", "channel", "state", "failed_step"]
    list_select_related = ["user"]
    search_fields = ["sha256", "filename", "oci_ref", "reason"]
    raw_id_fields = ["evidence"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[UploadLog]:
        return super().get_queryset(request).defer("transcript")


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    list_display = ["prefix", "user", "role", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["role"]
    exclude = ["key_hash"]
    actions = ["revoke"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and request.user.has_perm("evidence_app.change_apitoken")

    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset:
            tokens.token_revoke(token=token)
        self.message_user(request, f"Revoked {queryset.count()} token(s).", messages.SUCCESS)


class PointerTreeForm(forms.Form):
    """An AICR tree's ``recipes/evidence/`` (or ``recipes/``) as an uploaded tar or tar.gz,
    read with the bounded archive reader evidence directories use (never a server path)."""

    archive = forms.FileField(
        help_text="e.g. tar czf evidence.tgz recipes/evidence in an AICR checkout (at most "
        "10,000 files, 64 MiB unpacked)."
    )

    def clean_archive(self) -> dict[str, bytes]:
        upload = self.cleaned_data["archive"]
        data = upload.read(POINTER_TREE_MAX_BYTES + 1)
        if len(data) > POINTER_TREE_MAX_BYTES:
            raise ValidationError(f"The archive is larger than {POINTER_TREE_MAX_BYTES} bytes.")
        try:
            return read_archive(
                data,
                max_archive_bytes=POINTER_TREE_MAX_BYTES,
                max_unpacked_bytes=4 * POINTER_TREE_MAX_BYTES,
                max_member_bytes=1024 * 1024,
                max_members=10_000,
            )
        except SummaryBundleError as exc:
            raise ValidationError(f"Not a readable archive: {exc}") from None


@admin.register(EvidencePointer)
class EvidencePointerAdmin(ReadOnlyAdmin):
    """Imported AICR pointers (``manage.py import_evidence``, or an uploaded tree here);
    written by the service only."""

    change_list_template = "admin/evidence_app/evidencepointer/change_list.html"

    def get_urls(self) -> list[URLPattern]:
        upload = path(
            "import/",
            self.admin_site.admin_view(self.import_view),
            name="evidence_app_evidencepointer_import",
        )
        return [upload, *super().get_urls()]

    def import_view(self, request: HttpRequest) -> HttpResponse:
        """Upload an AICR tree's pointers; they are imported exactly as ``import_evidence``
        imports a checkout (the contract, pending rows, pulls where the policy allows)."""
        if not admin_roles(request) & {Role.MAINTAINER}:
            return HttpResponse("Only maintainers import pointer trees.", status=403)
        form = PointerTreeForm(request.POST or None, request.FILES or None)
        report = None
        if request.method == "POST" and form.is_valid():
            with tempfile.TemporaryDirectory(prefix="aicr-pointers-") as folder:
                for name, content in form.cleaned_data["archive"].items():
                    target = Path(folder) / name  # names checked relative by read_archive
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(content)
                try:
                    report = pointers.pointer_import(path=Path(folder))
                except pointers.PointerImportError as exc:
                    form.add_error("archive", str(exc))
            if report is not None:
                counts = ", ".join(f"{n} {k}" for k, n in sorted(report.outcomes.items()))
                messages.success(request, f"Imported the pointer tree: {counts or 'nothing'}.")
                return HttpResponseRedirect(
                    reverse("admin:evidence_app_evidencepointer_changelist")
                )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Import an AICR pointer tree",
            "form": form,
        }
        return TemplateResponse(request, "admin/evidence_app/evidencepointer/import.html", context)

    list_display = ["path", "recipe", "state", "claimed_class", "tries", "next_try", "evidence"]
    list_filter = ["state", "claimed_class"]
    search_fields = ["path", "recipe", "signer_identity", "source"]
    raw_id_fields = ["upload", "evidence"]


# --- releases -------------------------------------------------------------------------------


class ReleaseForm(forms.ModelForm):
    """A declaration checked by ``releases.declare`` (the API's check), stored by it too."""

    class Meta:
        model = Release
        fields = [
            "name",
            "operator_image",
            "operator_chart",
            "aicr_image",
            "validator_images",
            "profiles",
        ]

    def clean(self) -> dict[str, Any]:
        super().clean()
        try:
            self.cleaned_data.update(release_fields(self.cleaned_data))
        except ReleaseInputError as exc:
            field = exc.field.split("[", 1)[0].split(".", 1)[0]
            self.add_error(field if field in self.fields else None, str(exc))
        return self.cleaned_data


@admin.register(Release)
class ReleaseAdmin(admin.ModelAdmin):
    """Declared by maintainers; immutable afterwards (an image rebuild is a new release)."""

    form = ReleaseForm
    list_display = ["name", "operator_image", "created_by", "created_at"]
    readonly_fields = ["created_by", "created_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return Role.MAINTAINER in admin_roles(request) and super().has_add_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: Release, form: Any, change: bool) -> None:
        saved = release_declare(
            {name: form.cleaned_data[name] for name in ReleaseForm.Meta.fields}, by=request.user
        )
        obj.pk = saved.pk
        obj.created_by = saved.created_by
        obj.created_at = saved.created_at
