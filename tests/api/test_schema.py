"""The OpenAPI schema against the running API: schemathesis sends generated requests to every operation of
/api/schema/ on a live server with stored data, and checks that no answer is a 5xx and every answer (status, content
type, body) is one the schema documents. Bounded to 25 examples per operation so the suite stays fast."""

from __future__ import annotations

import pytest
import schemathesis
from django.contrib.auth import get_user_model
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from apps.api.services import create_token
from tests.builders import build_cluster

MAX_EXAMPLES = 25
# No 5xx; status, content type, headers and body as documented; schema-invalid input refused. Not
# positive_data_acceptance: a schema-valid request can still be wrong (since after until, an unknown node), and
# those are 400s/404s by design.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
# Path parameters that exist, so generated requests also reach the code behind the 404s.
REAL_PATH = {"cluster": "demo", "namespace": "shop", "pod": "api-0"}


def test_generated_schema_documents_every_endpoint(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert set(schema["paths"]) == {
        "/api/v1/clusters/",
        "/api/v1/clusters/{cluster}/",
        "/api/v1/clusters/{cluster}/nodes/",
        "/api/v1/clusters/{cluster}/namespaces/",
        "/api/v1/clusters/{cluster}/namespaces/{namespace}/containers/",
        "/api/v1/clusters/{cluster}/namespaces/{namespace}/changes/",
        "/api/v1/clusters/{cluster}/namespaces/{namespace}/pods/{pod}/series/",
        "/api/v1/clusters/{cluster}/namespaces/{namespace}/summary/",
        "/api/v1/recommendations/",
        "/api/v1/kernel-check/",
        "/api/v1/ingest/",
        "/metrics",
    }
    summary = schema["paths"]["/api/v1/clusters/{cluster}/namespaces/{namespace}/summary/"]["get"]
    assert set(summary["responses"]["200"]["content"]) == {"text/plain", "text/markdown", "application/json"}
    recommendations = schema["paths"]["/api/v1/recommendations/"]["get"]["responses"]["200"]["content"]
    assert set(recommendations) == {"application/json", "text/csv"}
    row = schema["components"]["schemas"]["ReportRow"]["properties"]
    assert list(row)[:4] == ["cluster", "namespace", "pod", "container"] and "recommendations" in row
    ingest = schema["paths"]["/api/v1/ingest/"]["post"]
    assert {"200", "400", "401", "403", "413"} <= set(ingest["responses"])


def check_operation(
    operation: schemathesis.APIOperation, base_url: str, key: str, examples: int = MAX_EXAMPLES
) -> None:
    """Send up to `examples` generated requests (schema-valid, schema-invalid, and with real path parameters)."""
    real = {name: value for name, value in REAL_PATH.items() if f"{{{name}}}" in operation.path}
    strategies = [
        operation.as_strategy(),
        operation.as_strategy(generation_mode=schemathesis.GenerationMode.NEGATIVE),
    ]
    if real:
        strategies.append(operation.as_strategy(path_parameters=real))

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=st.one_of(strategies))
    def check(case: schemathesis.Case) -> None:
        case.call_and_validate(base_url=base_url, headers={"Authorization": f"Token {key}"}, checks=CHECKS)

    check()


@pytest.mark.django_db(transaction=True)
def test_every_operation_answers_within_its_schema(live_server):
    demo = build_cluster("demo")
    user = get_user_model().objects.create_user("schema-check")
    # Each operation with the token it is for, and with the others (a 403, or a 404 outside a limited token's scope:
    # documented too): the read token, one limited to namespace batch, and an ingest token.
    keys = {
        "read": create_token(user, "read")[1],
        "limited": create_token(user, "read", cluster=demo, namespaces=["batch"])[1],
        "ingest": create_token(user, "ingest", cluster=demo)[1],
    }
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/schema/")

    failures: dict[str, str] = {}
    operations = [result.ok() for result in schema.get_all_operations() if isinstance(result, Ok)]
    assert len(operations) == 12
    for operation in operations:
        meant = "ingest" if operation.method.upper() == "POST" else "read"
        for kind, key in keys.items():
            try:
                check_operation(operation, live_server.url, key, MAX_EXAMPLES if kind == meant else 8)
            except Exception as exc:  # collect every operation's failure, then report them together
                failures[f"{operation.method.upper()} {operation.path} ({kind} token)"] = str(exc)[:2000]
    assert not failures, "\n\n".join(f"{name}:\n{text}" for name, text in failures.items())
