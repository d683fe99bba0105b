#!/usr/bin/env bash
# One merchant client: creates payments through HAProxy one after another, each under its
# own Idempotency-Key, retrying the same key on connection errors, 5xx, 409 and 429 until a
# 2xx (for up to RETRY_SECS). Runs until the file $STOP exists (the order in flight is
# finished first).
#
#   workload.sh WORKER_ID OUT_DIR
#
# Appends to OUT_DIR/attempts.tsv one line per HTTP attempt:
#   epoch_ms  worker  order_key  attempt  http_code  error_code  payment_id  status  sent_ms
# (epoch_ms: when the answer came; sent_ms: when the request was sent;
#  http_code 000: no answer) and to OUT_DIR/acks.tsv one line per acknowledged payment:
#   epoch_ms  order_key  payment_id  status
set -uo pipefail
. "$(dirname "$0")/lib.sh"
w=$1 out=$2
: "${STOP:=$out/stop}" "${RETRY_SECS:=120}" "${PAUSE_SECS:=0.05}"
key=$(cat "$D/converge/merchant.key")
api="http://$HAPROXY_HOST:$HAPROXY_API_PORT"
run=${RUN_ID:-$(date +%s)}
n=0
body_file=$(mktemp)
trap 'rm -f "$body_file"' EXIT
while [ ! -e "$STOP" ]; do
  n=$((n + 1))
  order="r$run-w$w-o$n"
  amount=$((1000 + (n % 50)))  # last two digits 00-49: the sandbox's plain success path
  a=0 t0=$SECONDS
  while :; do
    a=$((a + 1))
    sent=$(date +%s%3N)
    code=$(curl -s -o "$body_file" -w '%{http_code}' --max-time 15 "$api/v1/payments" \
      -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
      -H "Idempotency-Key: $order" \
      -d "{\"amount\":$amount,\"currency\":\"CNY\",\"merchant_order_id\":\"$order\"}")
    read -r err id status < <(jq -r '[(.error.code // "-"), (.id // "-"), (.status // "-")] | @tsv' "$body_file" 2>/dev/null || echo "- - -")
    [ -n "${err:-}" ] || err=-
    if [ "$code" = 000 ] || [ "$code" -ge 500 ] 2>/dev/null; then
      [ -s "$body_file" ] && [ "$err" = - ] && err=non-json
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date +%s%3N)" "$w" "$order" "$a" "$code" "$err" "${id:--}" "${status:--}" "$sent" >>"$out/attempts.tsv"
    case $code in
      2??)
        printf '%s\t%s\t%s\t%s\n' "$(date +%s%3N)" "$order" "$id" "$status" >>"$out/acks.tsv"
        break ;;
      000 | 5?? | 409 | 429) ;;
      *) break ;;  # another 4xx: a client error, not retried
    esac
    ((SECONDS - t0 >= RETRY_SECS)) && break
    sleep 0.2
  done
  sleep "$PAUSE_SECS"
done
