"""Proposing an AICR tree's ``allowlist.yaml`` to this site: diff, then merge and publish.

The site's allowlist in force is the base. The tree's entries are laid over it: an entry the
tree has is taken as the tree writes it (so a source the tree moved to another class moves);
an entry only the site has (a maintainer added it) is kept, never dropped. The merged document
is published through ``signers.allowlist_publish``, the service the admin's allowlist form
uses, so the version, its note and every signer's class change are recorded the same way.

Entries are matched by what they pin: a community/partner entry by its source slug, a
first-party entry by (issuer, identityPattern).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from evidence_app.corroborate import allowlist as al
from evidence_app.models import Allowlist, Signer, SignerKind
from evidence_app.services import signers

_SECTIONS = (("firstParty", al.FIRST_PARTY), ("community", al.COMMUNITY), ("partner", al.PARTNER))


def _key(entry: al.AllowlistEntry) -> tuple[str, ...]:
    if entry.source:
        return ("source", entry.source)
    return ("pattern", entry.issuer, entry.identity_pattern)


def _describe(entry: al.AllowlistEntry) -> str:
    pinned = f"source {entry.source}" if entry.source else f"pattern {entry.identity_pattern}"
    label = f" ({entry.label})" if entry.label else ""
    return f"{pinned}{label}, issuer {entry.issuer}"


@dataclass(frozen=True)
class SignerChange:
    label: str
    slug: str
    from_class: str
    to_class: str
    from_counted: bool
    to_counted: bool


@dataclass
class AllowlistDiff:
    added: dict[str, list[str]] = field(default_factory=dict)  # in the tree, not on the site
    kept: dict[str, list[str]] = field(default_factory=dict)  # site only: kept when applied
    moved: list[str] = field(default_factory=list)  # same pin, another class
    signers: list[SignerChange] = field(default_factory=list)
    merged_body: str = ""
    current: Allowlist | None = None

    @property
    def changes_anything(self) -> bool:
        return bool(any(self.added.values()) or self.moved or self.signers)

    def lines(self) -> list[str]:
        out: list[str] = []
        for _, class_ in _SECTIONS:
            for text in self.added.get(class_, []):
                out.append(f"+ {class_}: {text}")
            for text in self.kept.get(class_, []):
                out.append(f"= {class_}: {text} (only on this site: kept)")
        out += [f"~ {text}" for text in self.moved]
        for change in self.signers:
            out.append(
                f"signer {change.label} ({change.slug}): {change.from_class}"
                f"{' counted' if change.from_counted else ''} -> {change.to_class}"
                f"{' counted' if change.to_counted else ''}"
            )
        if not self.changes_anything:
            out.append("the site's allowlist already has every entry of the tree's")
        return out


def _merge(site: al.Allowlist | None, tree: al.Allowlist) -> tuple[list[al.AllowlistEntry], Any]:
    tree_keys = {_key(e): e for e in tree.entries}
    site_entries = list(site.entries) if site is not None else []
    merged = list(tree.entries) + [e for e in site_entries if _key(e) not in tree_keys]
    return merged, tree_keys


def _render(entries: list[al.AllowlistEntry]) -> str:
    doc: dict[str, Any] = {"schemaVersion": al.SCHEMA_VERSION}
    for section, class_ in _SECTIONS:
        items = []
        for e in (e for e in entries if e.class_ == class_):
            item = {"label": e.label} if e.label else {}
            item["issuer"] = e.issuer
            if e.source:
                item["source"] = e.source
            else:
                item["identityPattern"] = e.identity_pattern
            items.append(item)
        doc[section] = items
    header = (
        "# Merged by import_evidence: the AICR tree's allowlist.yaml laid over this site's;\n"
        "# entries only this site has are kept.\n"
    )
    return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=1000)


def allowlist_diff(*, tree_body: str | bytes) -> AllowlistDiff:
    """What applying the tree's allowlist would change (``ValidationError`` if it is invalid,
    or if merging it with the site's makes an invalid allowlist)."""
    tree = signers.allowlist_parse(tree_body)
    current_row, site = signers.allowlist_in_force()
    site_keys = {_key(e): e for e in (site.entries if site is not None else ())}
    merged, tree_keys = _merge(site, tree)
    diff = AllowlistDiff(current=current_row)
    for _, class_ in _SECTIONS:
        diff.added[class_] = [
            _describe(e) for e in tree.entries if e.class_ == class_ and _key(e) not in site_keys
        ]
        diff.kept[class_] = [
            _describe(e)
            for e in (site.entries if site is not None else ())
            if e.class_ == class_ and _key(e) not in tree_keys
        ]
    for key, entry in tree_keys.items():
        before = site_keys.get(key)
        if before is not None and before.class_ != entry.class_:
            diff.moved.append(f"{_describe(entry)}: {before.class_} -> {entry.class_}")
    diff.merged_body = _render(merged)
    merged_allowlist = signers.allowlist_parse(diff.merged_body)
    for signer in Signer.objects.filter(kind=SignerKind.KEYLESS).order_by("label", "pk"):
        decision = signers.classify_keyless(signer.issuer, signer.identity, merged_allowlist)
        if (decision.signer_class, decision.counted) != (signer.signer_class, signer.counted):
            diff.signers.append(
                SignerChange(
                    label=signer.label,
                    slug=signer.slug,
                    from_class=signer.signer_class,
                    to_class=decision.signer_class,
                    from_counted=signer.counted,
                    to_counted=decision.counted,
                )
            )
    return diff


def allowlist_apply(
    *, tree_body: str | bytes, note: str, by: Any = None
) -> tuple[AllowlistDiff, Allowlist | None]:
    """Publish the merged allowlist as a new version (None when nothing would change)."""
    diff = allowlist_diff(tree_body=tree_body)
    if not diff.changes_anything:
        return diff, None
    return diff, signers.allowlist_publish(body=diff.merged_body, note=note, by=by)
