"""Nodes, pods and containers stored before names were checked against Kubernetes' rules: no real cluster has them
(they came from a broken or forged source) and they broke pages, headers and downloads. They are removed, with
their containers; their samples go with retention."""

from django.db import migrations

from apps.clusters.names import name_problem


def remove(apps, schema_editor):
    Node = apps.get_model("clusters", "Node")
    Pod = apps.get_model("clusters", "Pod")
    Container = apps.get_model("clusters", "Container")
    bad_nodes = [pk for pk, name in Node.objects.values_list("pk", "name").iterator() if name_problem("node", name)]
    bad_pods = [
        pk
        for pk, namespace, name in Pod.objects.values_list("pk", "namespace", "name").iterator()
        if name_problem("namespace", namespace) or name_problem("pod", name)
    ]
    bad_containers = [
        pk for pk, name in Container.objects.values_list("pk", "name").iterator() if name_problem("container", name)
    ]
    for model, pks in ((Container, bad_containers), (Pod, bad_pods), (Node, bad_nodes)):
        for start in range(0, len(pks), 1000):
            model.objects.filter(pk__in=pks[start : start + 1000]).delete()


class Migration(migrations.Migration):
    # After the apps whose rows point at containers, so the deletes cascade through their current models.
    dependencies = [("clusters", "0001_initial"), ("advisor", "0003_expected_curve"), ("telemetry", "0002_period_samples")]

    operations = [migrations.RunPython(remove, migrations.RunPython.noop)]
