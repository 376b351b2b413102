"""A run stays ``publishing`` (its verdict stored) until its evidence or publish error is
recorded; see services/runs.py ``run_publish``."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("validators_app", "0004_image_digests"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='validationrun',
            name='validationrun_status_valid',
        ),
        migrations.AddField(
            model_name='validationrun',
            name='verdict',
            field=models.CharField(blank=True, choices=[('passed', 'Passed'), ('failed', 'Failed')], help_text="The orchestrator's passed/failed, stored while the run is publishing.", max_length=10),
        ),
        migrations.AlterField(
            model_name='validationrun',
            name='status',
            field=models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('publishing', 'Publishing'), ('passed', 'Passed'), ('failed', 'Failed'), ('error', 'Error'), ('cancelled', 'Cancelled')], db_index=True, default='queued', max_length=10),
        ),
        migrations.AddConstraint(
            model_name='validationrun',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['queued', 'running', 'publishing', 'passed', 'failed', 'error', 'cancelled'])), name='validationrun_status_valid'),
        ),
    ]
