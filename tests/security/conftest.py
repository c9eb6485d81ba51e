"""Security tests reuse the API's users, tokens, clients and stored cluster (tests/api/conftest.py)."""

from tests.api.conftest import api_user, client_for, demo, ingest_cluster, ingest_key, read_key, reader  # noqa: F401
