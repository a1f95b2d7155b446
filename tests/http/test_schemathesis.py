"""The served OpenAPI document, fuzzed by schemathesis over real HTTP: every operation, generated valid
and invalid requests; never a 5xx, every response valid against the schema (status, content type,
body), and invalid input refused with a 4xx."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable

from tests.conftest import require_module
from tests.http.conftest import Api

schemathesis = require_module("schemathesis", 'pip install -e ".[dev]" to run the schemathesis test')
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

POSITIVE = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
NEGATIVE = POSITIVE  # invalid requests must get a 4xx that the schema describes, never a 5xx
EXAMPLES = {"sqlite": (22, 11), "postgres": (12, 6)}  # valid and invalid cases per operation, per store
"""Per store: on SQLite at least 1,000 cases in all (37 operations x 33, about 1,190 generated), fewer on
PostgreSQL."""


SHORT_WAIT = 0.01
"""Seconds a long poll lasts here at most: a real wait on the server, long enough to be one."""


def _short_waits(case: Any) -> Any:
    """A long poll lasts at most SHORT_WAIT here (a generated or default timeout would hold a queued job up to
    60 s, a claim up to 300 s; 0.2 s made most of the test's time, spent waiting)."""
    if case.operation.path == "/v1/worker/claim" and isinstance(case.body, dict):
        wait = case.body.get("wait")
        if isinstance(wait, int | float) and not isinstance(wait, bool) and wait > SHORT_WAIT:
            case.body["wait"] = SHORT_WAIT
    if case.operation.path.endswith("/wait"):
        query = case.query if isinstance(case.query, dict) else {}
        timeout = query.get("timeout")
        if timeout is None or (isinstance(timeout, int | float) and not isinstance(timeout, bool)
                               and timeout > SHORT_WAIT):
            query["timeout"] = SHORT_WAIT
        case.query = query
    return case


def seed(api: Api, headers: dict[str, str]) -> None:
    """Jobs with small ids, a run and a finished job, so generated ids find things to act on."""
    for i in range(3):
        r = api.client.post("/v1/jobs", json={"binding": "Echo", "payload": {"i": i}}, headers=headers)
        assert r.status_code == 201, r.text
    r = api.client.post("/v1/runs", json={"flow": "greet", "input": {}, "id": "a"}, headers=headers)
    assert r.status_code == 201, r.text


def fuzz(strategy: Any, examples: int, checks: list[Any], base_url: str, headers: dict[str, str],
         counted: dict[str, Any]) -> Any:
    """A hypothesis test that sends each generated case and checks its response."""

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def run(case: Any) -> None:
        response = case.call(base_url=base_url, headers=headers, timeout=30)
        counted["cases"] += 1
        counted["statuses"].add(response.status_code)
        case.validate_response(response, checks=checks, headers=headers)

    return run


@pytest.mark.slow  # about a thousand requests: started first in the parallel run (tests/conftest.py)
def test_every_operation_fuzzed(api: Api, store_url: str) -> None:
    token = api.token("fuzz", "admin")
    headers = {"Authorization": f"Bearer {token}"}
    seed(api, headers)
    schema = schemathesis.openapi.from_url(f"{api.url}/v1/openapi.json")
    kind = "sqlite" if store_url.startswith("sqlite") else "postgres"
    positive, negative = EXAMPLES[kind]
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 28, [op.label for op in operations]
    counted = {"cases": 0, "statuses": set()}

    for op in operations:
        for mode, examples, checks in ((schemathesis.GenerationMode.POSITIVE, positive, POSITIVE),
                                       (schemathesis.GenerationMode.NEGATIVE, negative, NEGATIVE)):
            run = fuzz(op.as_strategy(generation_mode=mode).map(_short_waits), examples, checks, api.url, headers,
                       counted)
            try:
                run()
            except Unsatisfiable:  # nothing of the operation can be made invalid (no parameters, no body)
                assert mode == schemathesis.GenerationMode.NEGATIVE and not op.body and not op.query, op.label
            except Exception as exc:
                raise AssertionError(f"{op.label} ({mode.value}): {exc}") from exc
    if kind == "sqlite":
        assert counted["cases"] >= 1000, counted
    assert not any(s >= 500 for s in counted["statuses"]), counted
    assert {200, 404, 422} <= counted["statuses"], counted


