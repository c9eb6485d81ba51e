"""A name cannot choose the file a browser saves, nor break the download (issue 14, item 5): a namespace
`a";filename*=UTF-8''evil.cmd;b="` made Chromium save the CSV as evil.cmd (page and API), and CR/LF in a namespace
answered 500 (BadHeaderError). Every Content-Disposition is built by Django's content_disposition_header from a file
name with only [A-Za-z0-9._-] from the names."""

from __future__ import annotations

import re
from email.message import Message
from pathlib import Path
from urllib.parse import quote

import pytest

from apps.advisor.models import Finding
from apps.clusters.models import Cluster, Pod

APPS = Path(__file__).resolve().parents[2] / "apps"
HOSTILE = {
    "parameter": "a\";filename*=UTF-8''evil.cmd;b=\"",
    "header-split": "a\r\nSet-Cookie: x=1",
    "path": "..\\..\\evil.cmd",
}


def saved_name(content_disposition: str) -> str | None:
    """The file name an RFC 6266 reader takes (filename* would win over filename)."""
    message = Message()
    message["Content-Disposition"] = content_disposition
    return message.get_filename()


def downloads(reader, client, cluster: str, namespace: str):
    yield reader.get("/api/v1/recommendations/", {"format": "csv", "cluster": cluster, "namespace": namespace})
    yield client.get(f"/c/{quote(cluster, safe='')}/ns/{quote(namespace, safe='')}/recommendations.csv")
    yield reader.get("/api/v1/recommendations/", {"format": "csv", "cluster": cluster})
    yield client.get(f"/c/{quote(cluster, safe='')}/recommendations.csv")


@pytest.mark.parametrize("name", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_namespace_or_cluster_name_cannot_choose_the_saved_file(reader, client, api_user, demo, name):
    Pod.objects.filter(cluster=demo, namespace="batch").update(namespace=name)
    Finding.objects.filter(cluster=demo, namespace="batch").update(namespace=name)
    Cluster.objects.filter(pk=demo.pk).update(name=name)
    client.force_login(api_user)
    for response in downloads(reader, client, name, name):
        assert response.status_code == 200, response.content[:300]
        header = response["Content-Disposition"]
        saved = saved_name(header)
        assert saved is not None and re.fullmatch(r"cputune-[A-Za-z0-9._-]+-recommendations\.csv", saved), header
        assert "filename*" not in header
        assert "\r" not in header and "\n" not in header and "Set-Cookie" not in response.headers


def test_every_content_disposition_comes_from_djangos_helper():
    assignments = [
        (path.relative_to(APPS.parent), line.strip())
        for path in APPS.rglob("*.py")
        for line in path.read_text().splitlines()
        if re.search(r"""\[["']Content-Disposition["']\]\s*=""", line)
    ]
    assert assignments, "the walk found no download"
    assert [a for a in assignments if "content_disposition_header(" not in a[1]] == []
