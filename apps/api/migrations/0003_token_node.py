from django.db import migrations, models


def bind_unbound_ingest_tokens(apps, schema_editor):
    """An unbound ingest token could only ever push into a cluster holding the agent's node; with one cluster that
    is the one it belongs to. With several, nothing tells which: those tokens are refused at push (the 403 says why)."""
    Cluster = apps.get_model("clusters", "Cluster")
    ApiToken = apps.get_model("api", "ApiToken")
    clusters = list(Cluster.objects.all()[:2])
    if len(clusters) == 1:
        ApiToken.objects.filter(scope="ingest", cluster__isnull=True).update(cluster=clusters[0])


class Migration(migrations.Migration):
    dependencies = [
        ("api", "0002_token_cluster"),
        ("clusters", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="node_name",
            field=models.CharField(
                blank=True,
                help_text="Ingest tokens, optional: the one node that may push with this token (empty: any node of the cluster).",
                max_length=253,
            ),
        ),
        migrations.AlterField(
            model_name="apitoken",
            name="cluster",
            field=models.ForeignKey(
                blank=True,
                help_text="Ingest tokens: the cluster their node agents push into (required).",
                null=True,
                on_delete=models.deletion.CASCADE,
                related_name="api_tokens",
                to="clusters.cluster",
            ),
        ),
        migrations.RunPython(bind_unbound_ingest_tokens, migrations.RunPython.noop),
    ]
