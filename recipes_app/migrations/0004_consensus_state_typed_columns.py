"""The stored consensus badge moves from one ``|``-joined string into typed columns.

``badge`` held ``state|demo|counted_runs|stale_runs|code=count,…`` (the removed
``RecipeBadge.encode``); each existing row is decoded into ``includes_demo``, ``counted_runs``,
``stale_runs`` and ``stale_reasons`` before the column goes, and encoded back on the way down.
The codec is copied here, frozen: the product no longer has one.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models


def _decoded(text: str) -> dict[str, Any]:
    """The typed columns of one old ``badge`` string; a malformed one is a plain badge (as
    ``RecipeBadge.decode`` read it)."""
    parts = (text or "").split("|")
    if len(parts) != 5 or not all(p.isdigit() for p in parts[1:4]):
        return {"includes_demo": False, "counted_runs": 0, "stale_runs": 0, "stale_reasons": {}}
    reasons: dict[str, int] = {}
    for item in filter(None, parts[4].split(",")):
        code, _, count = item.partition("=")
        reasons[code] = int(count) if count.isdigit() else 0
    counted, stale = int(parts[2]), int(parts[3])
    return {
        "includes_demo": parts[1] == "1",
        "counted_runs": counted,
        "stale_runs": min(stale, counted),  # the new check constraint; encode never broke it
        "stale_reasons": reasons,
    }


def _encoded(row: Any, order: tuple[str, ...]) -> str:
    rank = {code: i for i, code in enumerate(order)}
    reasons = sorted(row.stale_reasons.items(), key=lambda item: (rank.get(item[0], 99), item[0]))
    joined = ",".join(f"{code}={count}" for code, count in reasons)
    demo = int(row.includes_demo)
    return f"{row.state}|{demo}|{row.counted_runs}|{row.stale_runs}|{joined}"


# The stale reason codes in the order the badge listed them, as of this migration.
STALE_CODE_ORDER = (
    "recipe-changed",
    "older-than-30-days",
    "aicr-outdated",
    "validator-catalog-outdated",
    "signer-not-allowlisted",
    "withdrawn",
)


def badge_to_columns(apps: Any, schema_editor: Any) -> None:
    state_model = apps.get_model("recipes_app", "RecipeConsensusState")
    rows = list(state_model.objects.only("pk", "badge"))
    for row in rows:
        for name, value in _decoded(row.badge).items():
            setattr(row, name, value)
    state_model.objects.bulk_update(
        rows, ["includes_demo", "counted_runs", "stale_runs", "stale_reasons"], batch_size=500
    )


def columns_to_badge(apps: Any, schema_editor: Any) -> None:
    state_model = apps.get_model("recipes_app", "RecipeConsensusState")
    rows = list(state_model.objects.all())
    for row in rows:
        row.badge = _encoded(row, STALE_CODE_ORDER)
    state_model.objects.bulk_update(rows, ["badge"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("recipes_app", "0003_recipe_consensus_state"),
    ]

    operations = [
        migrations.AddField(
            model_name="recipeconsensusstate",
            name="includes_demo",
            field=models.BooleanField(
                default=False, help_text="The state rests on evidence signed with a demo key."
            ),
        ),
        migrations.AddField(
            model_name="recipeconsensusstate",
            name="counted_runs",
            field=models.PositiveIntegerField(
                default=0, help_text="Counted runs the state rests on (newest per counted signer)."
            ),
        ),
        migrations.AddField(
            model_name="recipeconsensusstate",
            name="stale_runs",
            field=models.PositiveIntegerField(default=0, help_text="… of which stale."),
        ),
        migrations.AddField(
            model_name="recipeconsensusstate",
            name="stale_reasons",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="Stale reason code → how many counted runs it marks.",
            ),
        ),
        # The old column stays (a default, no longer written): processes of the previous
        # release read and write it until they restart. The next release's migration drops it.
        migrations.AlterField(
            model_name="recipeconsensusstate",
            name="badge",
            field=models.CharField(
                blank=True,
                default="",
                help_text="Deprecated, no longer written: the typed columns hold the badge.",
                max_length=500,
            ),
        ),
        migrations.RunPython(badge_to_columns, columns_to_badge),
        migrations.AddConstraint(
            model_name="recipeconsensusstate",
            constraint=models.CheckConstraint(
                condition=models.Q(stale_runs__lte=models.F("counted_runs")),
                name="consensus_stale_runs_are_counted_runs",
            ),
        ),
    ]
