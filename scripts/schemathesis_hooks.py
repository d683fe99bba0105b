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


# Registering a webhook endpoint (POST /v1/webhook_endpoints) depends on more than the body's
# form: its URL's host must resolve, and only to public addresses (DESIGN.md, SSRF rule). No
# JSON Schema can say that, and the checkers' server runs without DNS or a route out (in a
# network namespace, scripts/checkers.sh), so almost every schema-valid URL is refused with a
# documented 400 `url_address_refused` (one code for an unresolvable and an internal host, so
# that a refusal maps no internal DNS). The built-in
# positive_data_acceptance check is switched off for this one operation
# (scripts/schemathesis.toml) and this check takes its place: a schema-valid request may be
# refused only for its URL (one of the codes below, all in the document); any other refusal
# (events, description, key) still fails the run, exactly as positive_data_acceptance would.
WEBHOOK_CREATE = "POST /v1/webhook_endpoints"
URL_REFUSALS = {
    "invalid_url",
    "url_scheme_not_allowed",
    "url_user_info_not_allowed",
    "url_too_long",
    "url_address_refused",
    # Not the URL's, but no schema can say it either: the merchant's endpoints so far (a
    # run that registers public IP literals reaches --max-endpoints-per-merchant).
    "endpoint_limit",
}
# positive_data_acceptance's own default expected statuses, less 2xx/3xx/5xx (checked below).
ACCEPTED_REFUSALS = {401, 403, 404, 409, 429}


@schemathesis.check
def webhook_endpoint_acceptance(ctx, response, case):
    if case.operation.label != WEBHOOK_CREATE:
        return None
    meta = getattr(case, "meta", None)
    if meta is None or not meta.generation.mode.is_positive:
        return None
    from schemathesis.specs.openapi.checks import is_unexpected_http_status_case

    if is_unexpected_http_status_case(case):
        return None
    status = response.status_code
    if status < 400 or status >= 500 or status in ACCEPTED_REFUSALS:
        return None
    code = None
    if status == 400:
        try:
            code = response.json()["error"]["code"]
        except Exception:  # noqa: BLE001 - any unreadable answer is a failure below
            code = None
        if code in URL_REFUSALS:
            return None
    raise AssertionError(
        f"Valid data should have been accepted: {status} {code or ''} "
        f"(only a refusal of the URL's address, {sorted(URL_REFUSALS)}, is allowed here)"
    )
