#!/usr/bin/env bash
# One merchant client: creates payments through HAProxy one after another, each under its
# own Idempotency-Key, retrying the same key on connection errors, 5xx, 409 and 429 until a
# 2xx (for up to RETRY_SECS). Runs until the file $STOP exists (the order in flight is
# finished first).
#
#   workload.sh WORKER_ID OUT_DIR
#
# Every REFUND_EVERY-th order (default 3; 0: none) that is acknowledged SUCCESS is then refunded
# in full under its own key (`ORDER-refund`), retried the same way, so its payment carries
# several events (payment.succeeded, then payment.refunded after refund.succeeded) whose order
# in the stream the drill checks. Every REVERSE_EVERY-th order (default 4; 0: none) of the others
# that is acknowledged SUCCESS is listed in OUT_DIR/to_reverse.tsv (`epoch_ms  payment_id
# order_key`) for the ops pair (ops.sh) to reverse under maker-checker.
#
# Appends to OUT_DIR/attempts.tsv one line per HTTP attempt of a create:
#   epoch_ms  worker  order_key  attempt  http_code  error_code  payment_id  status  sent_ms
# (epoch_ms: when the answer came; sent_ms: when the request was sent;
#  http_code 000: no answer) and to OUT_DIR/acks.tsv one line per acknowledged payment:
#   epoch_ms  order_key  payment_id  status
# and the same for refunds to OUT_DIR/refund_attempts.tsv and OUT_DIR/refund_acks.tsv (with
# the refund's id and status).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
w=$1 out=$2
: "${STOP:=$out/stop}" "${RETRY_SECS:=120}" "${PAUSE_SECS:=0.05}"
key=$(cat "$D/converge/merchant.key")
api="http://$HAPROXY_HOST:$HAPROXY_API_PORT"
run=${RUN_ID:-$(date +%s)}
refund_every=${REFUND_EVERY:-3}
reverse_every=${REVERSE_EVERY:-4}
n=0
body_file=$(mktemp)
trap 'rm -f "$body_file"' EXIT
# request KEY PATH BODY TSV ACKS: POSTs under Idempotency-Key KEY until a 2xx (or a 4xx other
# than 409 idempotency_key_in_use / 429, or RETRY_SECS); one line per attempt to TSV, the
# 2xx to ACKS. Sets $id and $status from the last answer.
request() {
  local k=$1 path=$2 body=$3 tsv=$4 acks=$5 a=0 t0=$SECONDS code err sent
  while :; do
    a=$((a + 1))
    sent=$(date +%s%3N)
    code=$(curl -s -o "$body_file" -w '%{http_code}' --max-time 15 "$api$path" \
      -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
      -H "Idempotency-Key: $k" -d "$body")
    read -r err id status < <(jq -r '[(.error.code // "-"), (.id // "-"), (.status // "-")] | @tsv' "$body_file" 2>/dev/null || echo "- - -")
    [ -n "${err:-}" ] || err=-
    if [ "$code" = 000 ] || [ "$code" -ge 500 ] 2>/dev/null; then
      [ -s "$body_file" ] && [ "$err" = - ] && err=non-json
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date +%s%3N)" "$w" "$k" "$a" "$code" "$err" "${id:--}" "${status:--}" "$sent" >>"$tsv"
    case $code in
      2??)
        printf '%s\t%s\t%s\t%s\n' "$(date +%s%3N)" "$k" "$id" "$status" >>"$acks"
        return 0 ;;
      409) [ "$err" = idempotency_key_in_use ] || return 1 ;;
      000 | 5?? | 429) ;;
      *) return 1 ;;  # another 4xx: a client error, not retried
    esac
    ((SECONDS - t0 >= RETRY_SECS)) && return 1
    sleep 0.2
  done
}
while [ ! -e "$STOP" ]; do
  n=$((n + 1))
  order="r$run-w$w-o$n"
  amount=$((1000 + (n % 50)))  # last two digits 00-49: the sandbox's plain success path
  if request "$order" /v1/payments "{\"amount\":$amount,\"currency\":\"CNY\",\"merchant_order_id\":\"$order\"}" \
    "$out/attempts.tsv" "$out/acks.tsv" && [ "$status" = SUCCESS ]; then
    if [ "$refund_every" -gt 0 ] && [ $((n % refund_every)) = 0 ]; then
      request "$order-refund" "/v1/payments/$id/refunds" "{\"amount\":$amount,\"reason\":\"drill\"}" \
        "$out/refund_attempts.tsv" "$out/refund_acks.tsv"
    elif [ "$reverse_every" -gt 0 ] && [ $((n % reverse_every)) = 1 ]; then
      printf '%s\t%s\t%s\n' "$(date +%s%3N)" "$id" "$order" >>"$out/to_reverse.tsv"
    fi
  fi
  sleep "$PAUSE_SECS"
done
