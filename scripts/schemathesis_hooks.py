"""Schemathesis hooks for scripts/checkers.sh (loaded through SCHEMATHESIS_HOOKS).

converge's Idempotency-Key contract asks a client for a new key for each new request: the same
key with another body is answered 422 `idempotency_key_reused` and nothing is written
(DESIGN.md "Idempotency contract"). JSON Schema cannot say "not used before", so schemathesis
reuses generated keys (the document's example `order-1-try` in particular) across different
bodies, and its positive_data_acceptance check would count the 422 as a valid request refused.

This hook makes a schemathesis client follow the contract for schema-valid requests only: each
positive case that carries an Idempotency-Key gets a fresh one (still 1 to 255 visible ASCII
characters, so still valid). The check itself is unchanged: a 422 (or any other refusal) for a
fresh key still fails the run. Negative cases keep whatever key was generated, so malformed,
missing and reused keys are still sent and must still be refused.
"""

import uuid

import schemathesis

HEADER = "Idempotency-Key"


@schemathesis.hook
def before_call(context, case, **kwargs):
    meta = getattr(case, "meta", None)
    positive = meta is None or meta.generation.mode.is_positive
    if not positive or not case.headers:
        return
    for name in list(case.headers):
        if name.lower() == HEADER.lower():
            case.headers[name] = f"st-{uuid.uuid4().hex}"
