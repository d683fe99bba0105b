#!/usr/bin/env bash
# The failover drill (issue 40): starts the topology (up.sh) in a fresh state directory, adds
# a merchant webhook receiver (`converge webhook-sink`, one endpoint for every event) and an
# ops pair (an operator and an approver), runs a merchant workload through HAProxy
# (workload.sh: creates, each retried under its Idempotency-Key until a 2xx, and refunds)
# with the ops pair reversing some of its payments under maker-checker (ops.sh), the relay
# publishing to the NATS cluster, and, under all that, SIGKILLs
#   1. the PostgreSQL primary's node (its Patroni and its postmaster: a lost machine),
#   2. one NATS node (the stream's leader; DRILL_NATS_VICTIM=relay: the relay's node),
#   3. one `converge serve`,
# restarting each and waiting for it to rejoin before the next. Then it lets the payments
# settle and checks:
#   lost    acknowledged (2xx) payments and refunds missing from the database, read on the
#           new primary (every third acknowledged payment is refunded in full: workload.sh),
#           and reversals the ops pair saw executed whose payment is not REVERSED
#   double  merchant orders with more than one payment, plus successful channel charges that
#           belong to no successful payment
#   converge verify passes (against the new primary and the channel)
#   5xx other than 503 answered by converge itself (HAProxy's own 502/503/504 are counted
#   apart: a server killed mid-request)
#   webhooks: every delivery succeeded, every event has one, and the receiver got each with
#           a 2xx and a signature the Standard Webhooks library verifies (webhook_check.mjs)
#   the stream, read back message by message (stream_check.py): each event once by its
#           Nats-Msg-Id, each aggregate's events in outbox (commit) order, every event the
#           database records as published present at the sequence recorded
# and prints the seconds of write unavailability (kill to first 2xx create) of each kill.
# DRILL_PG_KILL=postmaster kills only the primary's postmaster instead (its Patroni lives on
# and restarts it in place, briefly read-only, with no failover).
# The last lines are the figures, then `lost=N double=N stream_duplicates=N
# stream_out_of_order=N`; the exit status is non-zero on any
# failure. `--quick` runs short phases (about 2 minutes); `--keep` leaves the topology up.
#
#   CONVERGE_BIN=/path/to/converge bash deploy/ha/drill.sh --quick
set -uo pipefail
quick=0 keep=0
for a in "$@"; do
  case $a in
    --quick) quick=1 ;;
    --keep) keep=1 ;;
    *) echo "usage: drill.sh [--quick] [--keep]" >&2; exit 2 ;;
  esac
done
export CONVERGE_HA_DIR=${CONVERGE_HA_DIR:-${TMPDIR:-/tmp}/converge-ha-drill}
# The drill's webhook receiver listens on 127.0.0.1, which servers refuse to deliver to
# unless told (a real deployment's merchants are on the internet and need no such flag).
export CONVERGE_SERVE_FLAGS="${CONVERGE_SERVE_FLAGS:-} --webhook-allow-private"
. "$(dirname "$0")/lib.sh"
export_topology
if [ $quick = 1 ]; then
  workers=${DRILL_WORKERS:-4} warm=5 settle=5 nats_down=15 serve_down=5 tail_secs=5
else
  workers=${DRILL_WORKERS:-8} warm=20 settle=20 nats_down=30 serve_down=20 tail_secs=20
fi

bash "$HA_HERE/down.sh" --purge 2>/dev/null
if ! bash "$HA_HERE/up.sh"; then
  echo "drill: up.sh failed" >&2
  [ $keep = 1 ] || bash "$HA_HERE/down.sh" >/dev/null 2>&1  # what it had started
  exit 1
fi
. "$HA_HERE/lib.sh"  # the binary up.sh chose
export_topology
out=$D/drill
mkdir -p "$out"
# ---- the drill's merchant receiver and ops pair (the workload's, not the deployment's) ----
start_sink
wait_for 30 curl -sf --max-time 2 "http://$WEBHOOK_SINK_HOST:$WEBHOOK_SINK_PORT/health" ||
  { echo "drill: the webhook receiver did not start ($D/logs/sink.log)" >&2; bash "$HA_HERE/down.sh" >/dev/null 2>&1; exit 1; }
setup_rc=0
CONVERGE_SECRETS_KEY_FILE=$D/converge/secrets.key "$CONVERGE_BIN" webhook add ha-shop \
  "http://$WEBHOOK_SINK_HOST:$WEBHOOK_SINK_PORT/hooks/ok" --allow-private \
  --database-url "$(converge_db_url)" >"$D/converge/webhook.endpoint" || setup_rc=1
for who in operator:viewer,operator approver:viewer,approver; do
  name=ha-${who%%:*} password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
  echo "$name $password" >"$D/converge/ops.${who%%:*}"
  echo "$password" | "$CONVERGE_BIN" user add "$name" --role "${who#*:}" --password-stdin \
    --database-url "$(converge_db_url)" >/dev/null || setup_rc=1
done
[ $setup_rc = 0 ] || { echo "drill: could not add the webhook endpoint or the ops users" >&2; bash "$HA_HERE/down.sh" >/dev/null 2>&1; exit 1; }
cleanup() {
  touch "$out/stop" "$out/stop-sampler" "$out/stop-ops"
  [ $keep = 1 ] || bash "$HA_HERE/down.sh" >/dev/null 2>&1
}
trap cleanup EXIT
now_ms() { date +%s%3N; }
mark() { echo "$1 $(now_ms)" >>"$out/marks"; echo "drill: $(date +%T) $1" >&2; }
# When the first create sent at or after epoch ms $1 was acknowledged (nothing when none).
first_2xx_after() {
  awk -F'\t' -v t="$1" '$9 >= t && $5 ~ /^2/ {print $1; exit}' <(sort -n "$out/attempts.tsv")
}
# Waits up to $2 s for a 2xx create after ms $1; prints the seconds from $1 to it.
unavailable_secs() {
  local t0=$1 limit=$2 t
  local s=$SECONDS
  while :; do
    t=$(first_2xx_after "$t0")
    [ -n "$t" ] && { awk -v a="$t" -v b="$t0" 'BEGIN {printf "%.1f", (a - b) / 1000}'; return 0; }
    ((SECONDS - s >= limit)) && { echo "none-within-${limit}s"; return 1; }
    sleep 0.5
  done
}
q_primary() { # SQL on the current primary, straight to it (not through HAProxy)
  local p i port
  p=$(pg_primary) || return 1
  i=${p#pg}
  eval "port=\$PG${i}_PORT host=\$PG${i}_HOST"
  PGPASSWORD=$CONVERGE_DB_PASSWORD psql -h "$host" -p "$port" -U "$CONVERGE_DB_USER" -d "$CONVERGE_DB_NAME" -qtAX -c "$1"
}
fail=0
# Seconds from epoch ms $2 until the outbox backlog in $1/samples, once it rose above its
# level before $2 (at least 20 events), is back to that level: 0 when it never rose (the
# relay did not pause), "none" when it never came back.
nats_catch_up() {
  awk -v t="$2" '{
      split($5, b, "="); split(b[2], o, ","); p = o[1]
      if ($1 <= t) { if (p ~ /^[0-9]+$/) base = p + 0; next }
      if (done || p !~ /^[0-9]+$/) next
      if (p + 0 > (base > 20 ? base : 20)) rose = 1
      else if (rose) { printf "%.1f", ($1 - t) / 1000; done = 1 }
    } END { if (!done) printf (rose ? "none" : "0") }' "$1/samples"
}

# ---- a sampler: each second the primary, the stream's last sequence on each node, the
# events waiting in the outbox and the payments not yet final ----
(
  while [ ! -e "$out/stop-sampler" ]; do
    p=$(pg_primary 2>/dev/null || echo none)
    sq=""
    for i in 1 2 3; do
      eval "a=\$NATS${i}_HOST:\$NATS${i}_HTTP_PORT"
      sq+="$(curl -s --max-time 1 "http://$a/jsz?streams=true" 2>/dev/null | jq -r '.account_details[0].stream_detail[0].state.last_seq // "-"' 2>/dev/null || echo -),"
    done
    ob=$(PGPASSWORD=$CONVERGE_DB_PASSWORD timeout 2 psql -h "$HAPROXY_HOST" -p "$HAPROXY_PG_PORT" -U "$CONVERGE_DB_USER" -d "$CONVERGE_DB_NAME" -qtAX \
      -c "SELECT (SELECT count(*) FROM outbox_pending) || ',' || (SELECT count(*) FROM payments WHERE status NOT IN ('SUCCESS','FAILED','REFUNDED','REVERSED'))" 2>/dev/null || echo -)
    printf '%s %s primary=%s stream_last_seq=%s outbox_pending,open_payments=%s\n' "$(now_ms)" "$(date +%T)" "$p" "${sq%,}" "${ob:--}" >>"$out/samples"
    sleep 1
  done
) &
sampler=$!

# ---- workload ----
: >"$out/attempts.tsv"
: >"$out/acks.tsv"
: >"$out/refund_attempts.tsv"
: >"$out/refund_acks.tsv"
: >"$out/to_reverse.tsv"
: >"$out/ops_attempts.tsv"
: >"$out/reversal_acks.tsv"
wpids=()
for w in $(seq 1 "$workers"); do
  RUN_ID=drill STOP=$out/stop bash "$HA_HERE/workload.sh" "$w" "$out" &
  wpids+=($!)
done
# The ops pair stops after the workload, once every listed payment is handled.
STOP=$out/stop-ops bash "$HA_HERE/ops.sh" "$out" &
ops_pid=$!
mark workload-started
sleep "$warm"

# ---- 1. the PostgreSQL primary's node ----
old=$(pg_primary) || { echo "drill: no primary before the kill" >&2; exit 1; }
pp=$(alive_pid "$old") pm=$(postmaster_pid "$old")
t_pg=$(now_ms)
if [ "${DRILL_PG_KILL:-node}" = postmaster ]; then
  kill -KILL "$pm"
  mark "pg-kill $old postmaster=$pm only (its Patroni lives)"
else
  kill -KILL "$pp" "$pm"
  mark "pg-kill $old patroni=$pp postmaster=$pm"
fi
pg_unavail=$(unavailable_secs "$t_pg" 120) || fail=1
mark "pg-first-2xx after ${pg_unavail}s"
promoted() { local p; p=$(pg_primary) && [ "$p" != "$old" ]; }
if [ "${DRILL_PG_KILL:-node}" = postmaster ]; then
  wait_for 60 pg_primary && mark "pg-primary $(pg_primary) (restarted in place by Patroni)"
  old=$(for n in pg1 pg2; do [ "$n" != "$(pg_primary)" ] && echo "$n"; done | head -n 1)
elif wait_for 120 promoted; then
  mark "pg-promoted $(pg_primary) after $(awk -v a="$(now_ms)" -v b="$t_pg" 'BEGIN {printf "%.1f", (a - b) / 1000}')s (or sooner)"
else
  mark "pg-NOT-promoted: no other primary within 120 s"
  fail=1
fi
sleep "$settle"
start_pg "${old#pg}"  # (a no-op when its Patroni runs)
rejoined() {
  local p i
  p=$(pg_primary) || return 1
  i=${p#pg}
  eval "curl -sf --max-time 2 http://\$PG${i}_HOST:\$PG${i}_API_PORT/cluster" |
    jq -e --arg n "$old" '.members[] | select(.name == $n and .role == "sync_standby" and .state == "running")' >/dev/null
}
if wait_for 180 rejoined; then
  mark "pg-rejoined $old as synchronous standby"
else
  mark "pg-NOT-rejoined $old"
  fail=1
fi
sleep "$settle"

# ---- 2. a NATS node: the one the relay is connected to ----
# DRILL_NATS_VICTIM=leader (default): the CONVERGE stream's leader, whose loss makes the
# survivors elect one (the hard case); =relay: the node converge's relay is connected to.
victim=1 relay_node=none leader=none
for i in 1 2 3; do
  eval "hp=\$NATS${i}_HTTP_PORT h=\$NATS${i}_HOST"
  c=$(curl -s --max-time 2 "http://$h:$hp/connz" | jq -r '.num_connections // 0')
  [ "${c:-0}" -gt 0 ] && relay_node=nats$i
  l=$(curl -s --max-time 2 "http://$h:$hp/jsz?streams=true" | jq -r '.account_details[0].stream_detail[0].cluster.leader // empty')
  [ -n "$l" ] && leader=$l
done
if [ "${DRILL_NATS_VICTIM:-leader}" = relay ] && [ "$relay_node" != none ]; then
  victim=${relay_node#nats}
elif [ "$leader" != none ]; then
  victim=${leader#nats}
fi
mark "nats: stream leader $leader, relay connected to $relay_node"
seq_of() { curl -s --max-time 2 "http://$1/jsz?streams=true" | jq -r '.account_details[0].stream_detail[0].state.last_seq // 0'; }
other=$((victim % 3 + 1))
eval "other_addr=\$NATS${other}_HOST:\$NATS${other}_HTTP_PORT"
seq_before=$(seq_of "$other_addr")
t_nats=$(now_ms)
kill -KILL "$(alive_pid "nats$victim")"
mark "nats-kill nats$victim (stream last_seq $seq_before)"
nats_unavail=$(unavailable_secs "$t_nats" 60) || fail=1
sleep "$nats_down"
seq_during=$(seq_of "$other_addr")
mark "nats-down ${nats_down}s: stream last_seq $seq_before -> $seq_during on nats$other"
# The relay must publish again while the node is still down (it pauses about 10 s when the
# stream's leader is lost: see README.md), so the node stays down longer than that.
[ "$seq_during" -gt "$seq_before" ] || { mark "nats-relay-STOPPED publishing while nats$victim was down"; fail=1; }
start_nats "$victim"
wait_for 60 nats_healthy "$victim" && mark "nats-restarted nats$victim" || { mark "nats-NOT-restarted"; fail=1; }
sleep "$settle"

# ---- 3. a converge server ----
t_serve=$(now_ms)
kill -KILL "$(alive_pid serve1)"
mark "serve-kill serve1"
serve_unavail=$(unavailable_secs "$t_serve" 60) || fail=1
sleep "$serve_down"
start_serve 1
wait_for 60 serve_healthy 1 && mark "serve-restarted serve1" || { mark "serve-NOT-restarted"; fail=1; }
sleep "$tail_secs"

# ---- stop the workload, let everything settle ----
touch "$out/stop"
mark workload-stopping
wait "${wpids[@]}"
touch "$out/stop-ops"
wait "$ops_pid" || { echo "drill: the ops pair failed" >&2; fail=1; }
mark workload-stopped
settled=0
for _ in $(seq 1 120); do
  open=$(q_primary "SELECT (SELECT count(*) FROM payments WHERE status IN ('PENDING','PROCESSING','UNKNOWN','CHANNEL_SUCCESS','AUTHORIZING','CAPTURING','VOIDING','REQUIRES_ACTION')) + (SELECT count(*) FROM outbox_pending) + (SELECT count(*) FROM refunds WHERE status = 'pending') + (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending')" 2>/dev/null)
  [ "$open" = 0 ] && { settled=1; break; }
  sleep 1
done
[ $settled = 1 ] && mark "settled" || mark "NOT settled: $open payments, refunds, events or deliveries open after 120 s"

# ---- figures ----
primary=$(pg_primary || echo none)
cut -f3 "$out/acks.tsv" | sort -u >"$out/acked_ids"
q_primary "SELECT id FROM payments" | sort >"$out/db_ids"
acked=$(wc -l <"$out/acked_ids")
lost=$(comm -23 "$out/acked_ids" "$out/db_ids" | tee "$out/lost_ids" | wc -l)
# Refunds: each acknowledged one stored (refunds are kept only in the database).
cut -f3 "$out/refund_acks.tsv" | sort -u >"$out/acked_refund_ids"
q_primary "SELECT id FROM refunds" | sort >"$out/db_refund_ids"
refunds_acked=$(wc -l <"$out/acked_refund_ids")
lost_refunds=$(comm -23 "$out/acked_refund_ids" "$out/db_refund_ids" | tee "$out/lost_refund_ids" | wc -l)
lost=$((lost + lost_refunds))
# Reversals: each one the ops pair saw executed ended with its payment REVERSED.
awk -F'\t' '$4 == "executed" {print $2}' "$out/reversal_acks.tsv" | sort -u >"$out/reversed_ids"
q_primary "SELECT id FROM payments WHERE status = 'REVERSED'" | sort >"$out/db_reversed_ids"
reversals_acked=$(wc -l <"$out/reversed_ids")
lost_reversals=$(comm -23 "$out/reversed_ids" "$out/db_reversed_ids" | tee "$out/lost_reversal_ids" | wc -l)
lost=$((lost + lost_reversals))
reversal_outcomes=$(cut -f4 "$out/reversal_acks.tsv" | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')
dup_orders=$(q_primary "SELECT count(*) FROM (SELECT merchant_id, merchant_order_id FROM payments GROUP BY 1, 2 HAVING count(*) > 1) d")
q_primary "SELECT channel_key FROM payments WHERE status IN ('SUCCESS','REFUNDED','REVERSED') OR captured_amount > 0" | sort -u >"$out/paid_keys"
curl -s --max-time 30 "http://$CHANNEL_HOST:$CHANNEL_PORT/charges" |
  jq -r '.charges[] | select(.status == "succeeded") | .key' | sort >"$out/channel_keys"
orphan_charges=$(comm -23 "$out/channel_keys" "$out/paid_keys" | wc -l)
double=$((dup_orders + orphan_charges))
codes=$(awk -F'\t' '{print $5}' "$out/attempts.tsv" | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')
refund_codes=$(awk -F'\t' '{print $5}' "$out/refund_attempts.tsv" | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')
conv_5xx=$(cat "$out/attempts.tsv" "$out/refund_attempts.tsv" "$out/ops_attempts.tsv" | awk -F'\t' '$5 ~ /^5/ && $5 != 503 && $6 != "bad_gateway" && $6 != "gateway_timeout" && $6 != "no_server_available"' | wc -l)
proxy_5xx=$(cat "$out/attempts.tsv" "$out/refund_attempts.tsv" "$out/ops_attempts.tsv" | awk -F'\t' '$6 == "bad_gateway" || $6 == "gateway_timeout"' | wc -l)
# Every 5xx a client saw, whoever answered it, other than 503 (issue 40: must be 0). HAProxy's
# own pages for a server that died mid-request (502) or did not answer in time (504) are 503s
# with Retry-After (haproxy-502.http, haproxy-504.http): "retry with the same key" is what
# the client must do in both cases, and the key makes that retry safe.
all_5xx=$(cat "$out/attempts.tsv" "$out/refund_attempts.tsv" "$out/ops_attempts.tsv" | awk -F'\t' '$5 ~ /^5/ && $5 != 503' | wc -l)
[ "$all_5xx" = 0 ] || { echo "drill: $all_5xx answers were a 5xx other than 503" >&2; fail=1; }
no_answer=$(cat "$out/attempts.tsv" "$out/refund_attempts.tsv" "$out/ops_attempts.tsv" | awk -F'\t' '$5 == "000"' | wc -l)
streams=""
for i in 1 2 3; do
  eval "a=\$NATS${i}_HOST:\$NATS${i}_HTTP_PORT"
  streams+="nats$i:$(curl -s --max-time 2 "http://$a/jsz?streams=true" | jq -r '.account_details[0].stream_detail[0].state.messages // "?"') "
done
payments=$(q_primary "SELECT count(*) FROM payments")
DATABASE_URL="postgres://$CONVERGE_DB_USER:$CONVERGE_DB_PASSWORD@${primary:+$(eval "echo \$PG${primary#pg}_HOST:\$PG${primary#pg}_PORT")}/$CONVERGE_DB_NAME" \
  CONVERGE_SECRETS_KEY_FILE=$D/converge/secrets.key \
  "$CONVERGE_BIN" verify --channel-url "http://$CHANNEL_HOST:$CHANNEL_PORT" >"$out/verify.txt" 2>&1
verify_rc=$?
cat "$out/verify.txt"
[ $verify_rc = 0 ] || fail=1
[ "$lost" = 0 ] || fail=1
[ "$double" = 0 ] || fail=1
[ "$conv_5xx" = 0 ] || fail=1
[ $settled = 1 ] || fail=1
# Webhooks: every delivery the database holds succeeded, and reached the merchant's receiver
# with a signature the Standard Webhooks library verifies (webhook_check.mjs).
read -r endpoint_id endpoint_secret <"$D/converge/webhook.endpoint"
q_primary "SELECT event_id FROM webhook_deliveries WHERE endpoint_id = '$endpoint_id'" >"$out/delivered_events"
deliveries_not_succeeded=$(q_primary "SELECT count(*) FROM webhook_deliveries WHERE status <> 'succeeded'")
[ "$deliveries_not_succeeded" = 0 ] || { echo "drill: $deliveries_not_succeeded webhook deliveries did not succeed" >&2; fail=1; }
events_without_delivery=$(q_primary "SELECT count(*) FROM events e WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND d.endpoint_id = '$endpoint_id')")
[ "$events_without_delivery" = 0 ] || { echo "drill: $events_without_delivery events have no delivery to the endpoint" >&2; fail=1; }
webhook_figures=$(node "$HA_HERE/webhook_check.mjs" "http://$WEBHOOK_SINK_HOST:$WEBHOOK_SINK_PORT" "$endpoint_secret" "$out/delivered_events") || fail=1
# Each event in the stream once (by Nats-Msg-Id), per aggregate in outbox (commit) order,
# every event recorded as published present, read back message by message (stream_check.py).
q_primary "COPY (SELECT id, seq, aggregatetype, aggregateid FROM events) TO STDOUT" >"$out/events.tsv"
q_primary "COPY (SELECT event_id, coalesce(stream_seq, 0), refused IS NOT NULL FROM event_publications) TO STDOUT" >"$out/publications.tsv"
stream_rc=1 stream_figures="stream-unread"
for i in 1 2 3; do
  eval "a=\$NATS${i}_HOST:\$NATS${i}_PORT"
  stream_figures=$(timeout 120 python3 "$HA_HERE/stream_check.py" "$a" CONVERGE "$out/events.tsv" "$out/publications.tsv" "$out" 2>"$out/stream_check.err")
  stream_rc=$?
  [ -n "$stream_figures" ] && break
done
[ -s "$out/stream_check.err" ] && sed 's/^/drill: /' "$out/stream_check.err" >&2
[ $stream_rc = 0 ] || fail=1
stream_dups=$(echo "$stream_figures" | grep -o 'duplicates=[0-9]*' | cut -d= -f2)
stream_order=$(echo "$stream_figures" | grep -o 'out_of_order=[0-9]*' | cut -d= -f2)
# Every node holds the whole stream again (the restarted one caught up).
[ "$(echo "$streams" | tr ' ' '\n' | grep -c . )" = 3 ] && [ "$(echo "$streams" | tr ' ' '\n' | grep . | cut -d: -f2 | sort -u | wc -l)" = 1 ] ||
  { echo "drill: the NATS nodes disagree on the stream: $streams" >&2; fail=1; }

touch "$out/stop-sampler"
echo "drill: samples (each second):"; sed 's/^[0-9]* /  /' "$out/samples"
echo "drill: marks:"; sed 's/^/  /' "$out/marks"
echo "drill: attempts by status: $codes(000: no answer); refunds: ${refund_codes:-none }"
echo "drill: stream messages per node: $streams(payments: $payments)"
echo "drill: stream read back: $stream_figures"
echo "drill: $webhook_figures (deliveries not succeeded: $deliveries_not_succeeded, events without one: $events_without_delivery)"
echo "drill: reversals by outcome: ${reversal_outcomes:-none }(executed and REVERSED: $((reversals_acked - lost_reversals)) of $reversals_acked)"
echo "drill: acknowledged=$acked refunds_acknowledged=$refunds_acked (lost: $lost_refunds) workers=$workers primary_now=$primary verify=$([ $verify_rc = 0 ] && echo pass || echo FAIL) state=$D"
# The longest time the stream did not grow while events waited in the outbox (from the
# samples): how long publication paused (a relay lease changing hands, a broker reconnect).
relay_stall=$(awk '{
    t = $1; split($4, a, "="); split(a[2], q, ","); m = -1
    for (i in q) if (q[i] ~ /^[0-9]+$/ && q[i] + 0 > m) m = q[i] + 0
    split($5, b, "="); split(b[2], o, ",")
    if (m > last || tl == "") { last = m; tl = t }
    if (o[1] ~ /^[0-9]+$/ && o[1] + 0 > 0 && (t - tl) / 1000 > best) { best = (t - tl) / 1000; at = $2 }
  } END { printf "%.0f%s", best, (at != "" ? " (until " at ")" : "") }' "$out/samples")
echo "drill: longest publication pause with events waiting: ${relay_stall}s"
# The NATS node's loss, seen from the outbox: from the kill until the backlog (outbox_pending),
# once it rose, is back to what it was at the kill (or 20 events when that was fewer): how
# long the relay took to publish again and catch up. Sampled about once a second (every ~2 s
# on a loaded machine), so to within a sample's interval.
nats_pause=$(nats_catch_up "$out" "$t_nats")
echo "drill: the relay caught up ${nats_pause}s after the NATS node's kill"
# The longest any one order waited from its first attempt to its acknowledgement (a request
# cut by a kill holds its Idempotency-Key for the key lease: retries get 409 meanwhile).
order_wait=$(awk -F'\t' '!($3 in first) {first[$3] = $9} $5 ~ /^2/ {w = ($1 - first[$3]) / 1000; if (w > best) {best = w; o = $3}} END {printf "%.1f %s", best, o}' "$out/attempts.tsv")
echo "drill: longest wait of one order, first attempt to 2xx: ${order_wait% *}s (${order_wait#* })"
echo "pg_failover_secs=$pg_unavail nats_unavailable_secs=$nats_unavail serve_unavailable_secs=$serve_unavail relay_pause_secs=${relay_stall%% *} nats_relay_pause_secs=$nats_pause max_order_wait_secs=${order_wait% *} converge_5xx_not_503=$conv_5xx proxy_502_504=$proxy_5xx any_5xx_not_503=$all_5xx no_answer=$no_answer"
echo "lost=$lost double=$double stream_duplicates=${stream_dups:-?} stream_out_of_order=${stream_order:-?}"
exit $fail
