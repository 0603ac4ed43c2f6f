"""Property-based run over /openapi.json (schemathesis): no 5xx, responses match the schema."""

from __future__ import annotations

from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from amcp.api.http import create_app
from amcp.memory import Memory


@schemathesis.serializer("application/x-ndjson")
def _ndjson(ctx: schemathesis.SerializationContext, value: object) -> bytes:
    # The import body is NDJSON text; generated values are strings (any other shape is sent
    # as its repr, which is just more malformed input).
    return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else repr(value).encode()


# The JSON schema cannot state every domain rule (KT-PATTERN needs a sample_size, AMQL must
# parse, a budget must hold the pack header), so schema-valid requests may still be a 400;
# the invariant here is "no 5xx, every response as documented", not "every valid-looking
# request succeeds".
DOMAIN_RULES = [checks.positive_data_acceptance, checks.negative_data_rejection]
MAX_EXAMPLES = 10  # per operation: 13 operations, well under a minute in all


def test_api_conforms(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hashing")
    try:
        mem.remember("seed memory for the property run", scope=["team:a"], tags=["seed"])
        # schemathesis's ASGI client calls itself "testserver": allowed like any named host.
        app = create_app(mem, allowed_hosts=["testserver"])
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 12
        for operation in operations:

            @given(case=operation.as_strategy())
            @settings(
                max_examples=MAX_EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def conforms(case: schemathesis.Case) -> None:
                case.call_and_validate(excluded_checks=DOMAIN_RULES)

            conforms()
    finally:
        mem.close()
