"""Hostile input (issue 12): schemathesis over every operation of the OpenAPI schema.

A live server answers generated requests, valid and invalid, sent with a valid token:
none may be a 5xx, and every status code, content type, header and body must be one
the schema documents. Then stateful sequences follow the links schemathesis infers
(a started run into its events, a listed conversation into its deletion, ...).
Bounded here; `benchmarks/schema_fuzz.py` runs the same at length. No operation is
left out: the tus PATCH is fuzzed without its binary body (it refuses it), and event
streams are read to their end, each event checked.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import FlakyStrategyDefinition
from schemathesis.specs.openapi.schemas import OpenApiSchema

from tests.conftest import scripted_server
from tests.support.live_server import LiveServer
from tests.support.schema_fuzz import REPLIES, load_schema

# Per operation, on top of schemathesis's own boundary and missing-value cases.
OPERATION_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
# Scenarios of a few linked calls each; like schemathesis's defaults, without shrinking.
# Not derandomized: a linked call draws from what the server answered before (ids), so a
# fixed choice sequence can meet different answers, which hypothesis reports as an
# inconsistent strategy (FlakyStrategyDefinition) when the suite runs on a busy machine.
# Random draws meet that too (hypothesis replays prefixes it has seen while it explores),
# so a run that stops there is run again with new draws; a server's wrong answer is a
# different error and fails at once.
STATEFUL_SETTINGS = settings(
    OPERATION_SETTINGS,
    max_examples=20,
    stateful_step_count=6,
    phases=[Phase.generate],
    derandomize=False,
)


@pytest.fixture(scope="module")
def fuzzed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # The fuzzer, as admin, may register an MCP server at a URL it made up: any connection
    # the server makes goes to a closed loopback port instead (tests talk to loopback only).
    nowhere = "http://127.0.0.1:9"
    proxies = {"HTTP_PROXY": nowhere, "HTTPS_PROXY": nowhere, "ALL_PROXY": nowhere, "NO_PROXY": ""}
    with scripted_server(tmp_path_factory.mktemp("fuzz"), REPLIES, **proxies) as server:
        yield server


@pytest.fixture(scope="module")
def api_schema(fuzzed_server: LiveServer) -> OpenApiSchema:
    return load_schema(fuzzed_server)


@pytest.fixture(autouse=True)
def _nodeid_for_schemathesis(request: pytest.FixtureRequest) -> None:
    # schemathesis 4.32's lazy loader renames the test through `_nodeid`, which pytest
    # 9.2 no longer has; its subtests are still labelled by operation.
    request.node._nodeid = request.node.nodeid


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@OPERATION_SETTINGS
def test_every_operation_answers_hostile_input_as_documented(case: schemathesis.Case) -> None:
    case.call_and_validate()


STATEFUL_TRIES = 3


def test_linked_operations_answer_as_documented(api_schema: OpenApiSchema) -> None:
    for tries_left in reversed(range(STATEFUL_TRIES)):
        try:
            api_schema.as_state_machine().run(settings=STATEFUL_SETTINGS)
            return
        except FlakyStrategyDefinition:  # the generator's bookkeeping, not the server
            if not tries_left:
                raise
