"""Rows stored before ingest checked period counts against each other: more throttled periods than periods (a broken
or forged source) gave ratios above 1. The impossible pairs become "not reported", as ingest now stores them; the
other counters of each row stay. Findings built on them are rebuilt by the next refresh."""

from django.db import migrations
from django.db.models import F


def repair(apps, schema_editor):
    Sample = apps.get_model("telemetry", "Sample")
    SeriesHead = apps.get_model("telemetry", "SeriesHead")
    HourlyRollup = apps.get_model("telemetry", "HourlyRollup")
    Sample.objects.filter(throttled_periods_total__gt=F("periods_total")).update(
        periods_total=None, throttled_periods_total=None
    )
    Sample.objects.filter(throttled_periods_delta__gt=F("periods_delta")).update(
        periods_delta=None, throttled_periods_delta=None
    )
    SeriesHead.objects.filter(throttled_periods_total__gt=F("periods_total")).update(
        periods_total=None, throttled_periods_total=None
    )
    HourlyRollup.objects.filter(throttled_periods__gt=F("periods")).update(periods=None, throttled_periods=None)


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0002_period_samples")]

    operations = [migrations.RunPython(repair, migrations.RunPython.noop)]
