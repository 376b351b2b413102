"""The releases' pages, feed and badge: AICR's "Qualified profiles" table made live.

- ``/releases/``: every declared release;
- ``/releases/<id>/``: its profiles, each status in the policy's words, the evidence it rests
  on (links) and the exact re-verify command the evidence page offers for it;
- ``/releases/<id>/feed.atom``: one entry per profile status, a new entry when it changes;
- ``/badges/releases/<id>.svg``: "<qualified> of <claimed> qualified", the recipe badge's SVG.

Public, like the evidence they read. Every status comes from ``releases.status`` (one rule).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.syndication.views import Feed
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.feedgenerator import Atom1Feed
from django.views.decorators.http import require_safe

from evidence_app.evidence_page import (
    CommandLine,
    pointer_commands,
    pointer_paths,
    verify_commands,
)
from evidence_app.models import Evidence, Release
from recipes_app.badges import CHAR_WIDTH, PADDING

from .status import (
    IN_PROGRESS,
    NOT_CLAIMED,
    NOT_QUALIFIED,
    QUALIFIED,
    STATUS_WORDS,
    UNQUALIFIED_CHANGED,
    ProfileStatus,
    accepts_key_signed,
    expected_identities,
    release_profiles,
    summary,
)

STATUS_CLASS = {
    QUALIFIED: "state--confirmed",
    IN_PROGRESS: "state--partial",
    UNQUALIFIED_CHANGED: "state--contested",
    NOT_QUALIFIED: "state--untested",
    NOT_CLAIMED: "state--untested",
}
BADGE_COLOURS = {"all": "#15803d", "some": "#0369a1", "none": "#475569"}
SHOWN_LINKS = 5


@dataclass
class ProfileRow:
    status: ProfileStatus
    first: Evidence | None
    commands: list[CommandLine]
    workload_images: list[str]

    @property
    def css(self) -> str:
        return STATUS_CLASS[self.status.status]

    @property
    def words(self) -> str:
        return STATUS_WORDS[self.status.status]

    @property
    def more(self) -> int:
        return max(0, len(self.status.evidence) - SHOWN_LINKS)

    @property
    def links(self) -> list[int]:
        return self.status.evidence[:SHOWN_LINKS]


def _rows(release: Release, statuses: list[ProfileStatus]) -> list[ProfileRow]:
    """Each status with the evidence it rests on first, and that evidence's commands (one
    query for the rows, one for all their pointers)."""
    firsts = [s.evidence[0] for s in statuses if s.evidence]
    loaded = {
        e.pk: e
        for e in Evidence.objects.filter(pk__in=firsts)
        .select_related("signer", "signer__key")
        .defer("content", "artifact", "transcript", "identities", "check_results")
    }
    paths = pointer_paths(list(loaded)) if loaded else {}
    workloads = {
        str(p.get("recipe")): [
            f"{w['image']}@{w['digest']}" for w in p.get("workload_images") or ()
        ]
        for p in release.profiles
    }
    rows = []
    for s in statuses:
        first = loaded.get(s.evidence[0]) if s.evidence else None
        commands = (
            pointer_commands(first, paths[first.pk]) + verify_commands(first)
            if first is not None
            else []
        )
        rows.append(ProfileRow(s, first, commands, workloads.get(s.recipe, [])))
    return rows


@require_safe
def release_list(request: HttpRequest) -> HttpResponse:
    releases = Release.objects.select_related("created_by").order_by("-created_at", "-pk")[:200]
    return render(request, "evidence_app/releases.html", {"releases": releases})


@require_safe
def release_detail(request: HttpRequest, pk: int) -> HttpResponse:
    release = get_object_or_404(Release, pk=pk)
    statuses = release_profiles(release, include_unclaimed=True)
    declared = [e for e in expected_identities(release, {}) if e.image]
    counts = summary(statuses)
    context: dict[str, Any] = {
        "release": release,
        "rows": _rows(release, statuses),
        "counts": counts,
        "tally": [(STATUS_WORDS[status], n) for status, n in counts.items() if n],
        "declared": declared,
        "accepts_key_signed": accepts_key_signed(),
    }
    return render(request, "evidence_app/release.html", context)


# --- the badge ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReleaseBadge:
    """The recipe badge's shape (``recipes_app/badge.svg``) with a release's message."""

    qualified: int
    claimed: int
    name: str

    @property
    def label(self) -> str:
        return f"AICR {self.name}"[:60]

    @property
    def message(self) -> str:
        return f"{self.qualified} of {self.claimed} qualified"

    @property
    def colour(self) -> str:
        if self.claimed and self.qualified == self.claimed:
            return BADGE_COLOURS["all"]
        return BADGE_COLOURS["some" if self.qualified else "none"]

    @property
    def label_width(self) -> int:
        return round(len(self.label) * CHAR_WIDTH) + PADDING

    @property
    def message_width(self) -> int:
        return round(len(self.message) * CHAR_WIDTH) + PADDING

    @property
    def width(self) -> int:
        return self.label_width + self.message_width


@require_safe
def release_badge(request: HttpRequest, pk: int) -> HttpResponse:
    release = Release.objects.filter(pk=pk).first()
    if release is None:
        response = render(
            request, "recipes_app/badge_unknown.svg", content_type="image/svg+xml", status=404
        )
    else:
        counts = summary(release_profiles(release))
        facts = ReleaseBadge(counts[QUALIFIED], len(release.profiles), release.name)
        response = render(
            request, "recipes_app/badge.svg", {"facts": facts}, content_type="image/svg+xml"
        )
    # As the recipe badge: shown in other sites' READMEs, so short-lived caches.
    response["Cache-Control"] = "public, max-age=300"
    return response


# --- the feed -------------------------------------------------------------------------------


@dataclass(frozen=True)
class StatusEntry:
    release: Release
    status: ProfileStatus
    at: datetime


class ReleaseFeed(Feed):
    """One entry per profile: its status now. The guid hashes the status, the reason and the
    evidence, so a change is a new entry for readers; its time is the newest evidence's."""

    feed_type = Atom1Feed
    description_template = None

    def get_object(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Release:
        release = Release.objects.filter(pk=kwargs["pk"]).first()
        if release is None:
            raise Http404("no such release")
        return release

    def title(self, obj: Release) -> str:
        return f"AICR release {obj.name}: qualified profiles"

    def subtitle(self, obj: Release) -> str:
        return "Each claimed profile's qualification status under AICR's support policy."

    def link(self, obj: Release) -> str:
        return reverse("releases:detail", args=[obj.pk])

    def items(self, obj: Release) -> list[StatusEntry]:
        statuses = release_profiles(obj)
        ids = [pk for s in statuses for pk in s.evidence[:1]]
        times = dict(Evidence.objects.filter(pk__in=ids).values_list("pk", "attested_at"))
        return [
            StatusEntry(
                obj, s, times.get(s.evidence[0], obj.created_at) if s.evidence else obj.created_at
            )
            for s in statuses
        ]

    def item_title(self, item: StatusEntry) -> str:
        return f"{item.status.recipe}: {STATUS_WORDS[item.status.status]}"

    def item_description(self, item: StatusEntry) -> str:
        return item.status.reason

    def item_link(self, item: StatusEntry) -> str:
        return reverse("releases:detail", args=[item.release.pk]) + f"#{item.status.recipe}"

    def item_guid(self, item: StatusEntry) -> str:
        s = item.status
        text = "\n".join([s.recipe, s.status, s.reason, ",".join(map(str, s.evidence))])
        return f"release-{item.release.pk}-{hashlib.sha256(text.encode()).hexdigest()[:24]}"

    item_guid_is_permalink = False

    def item_updateddate(self, item: StatusEntry) -> datetime:
        return item.at

    def item_pubdate(self, item: StatusEntry) -> datetime:
        return item.at

    def item_categories(self, item: StatusEntry) -> list[str]:
        return [item.status.status]


_feed = ReleaseFeed()


@require_safe
def release_feed(request: HttpRequest, pk: int) -> HttpResponse:
    return _feed(request, pk=pk)
