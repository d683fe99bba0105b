#!/usr/bin/env bash
# External checkers of converge's contracts (issue 16), run by scripts/test.sh after the binary
# is built: tools not written here check what converge publishes.
#
#   promtool (Debian `prometheus`): `check rules` and `test rules` on deploy/prometheus/,
#   and `check metrics` on a running server's /metrics after a small workload.
#
# Starts its own `converge channel-sim` and `converge serve` (target/debug/converge, which must
# be built) on free ports with their databases in a temporary directory, and stops them on
# exit. Any finding fails the script. CONVERGE_STRICT=1 turns a missing checker into a failure
# instead of a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
strict=${CONVERGE_STRICT:-0}
converge=${CONVERGE_BIN:-target/debug/converge}
started=$(date +%s)

fail_or_skip() {
  if [ "$strict" = 1 ]; then
    echo "checkers: $1 (CONVERGE_STRICT=1 forbids skipping)" >&2
    exit 1
  fi
  echo "checkers: WARNING: $1; that checker is skipped" >&2
}

[ -x "$converge" ] || { echo "checkers: $converge is not built (cargo build -p app --features ssr --bin converge)" >&2; exit 1; }

work=$(mktemp -d)
server_pid=
channel_pid=
stop_server() {
  for pid in $server_pid $channel_pid; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  server_pid=
  channel_pid=
}
cleanup() {
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT

# --- promtool -------------------------------------------------------------------------------
if ! command -v promtool >/dev/null; then
  echo "checkers: installing Debian's prometheus package (for promtool)" >&2
  # The package's post-install would start a Prometheus server on port 9090 (and a node
  # exporter on 9100) where an init system runs; only promtool is wanted. policy-rc.d is
  # Debian's switch that tells maintainer scripts not to start services.
  policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && policy=1
  fi
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null) ||
    echo "checkers: could not install prometheus" >&2
  [ -n "$policy" ] && rm -f /usr/sbin/policy-rc.d
  # Where the service was started anyway (an init system that ignores policy-rc.d), stop it.
  if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
    systemctl stop prometheus || true
  fi
fi
have_promtool=0
if command -v promtool >/dev/null; then
  have_promtool=1
  echo "checkers: promtool check rules + test rules (deploy/prometheus)" >&2
  promtool check rules deploy/prometheus/alerts.yml
  (cd deploy/prometheus && promtool test rules alerts_test.yml)
else
  fail_or_skip "promtool is not installed and could not be installed"
fi

# --- a channel and a converge server for the checks that need one ---------------------------
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
export DATABASE_URL="$work/converge.db"
key=$("$converge" merchant add checker-shop)
port=$(free_port)
channel_port=$(free_port)
base="http://127.0.0.1:$port"
channel="http://127.0.0.1:$channel_port"
secret=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
wait_for() { # url, pid, log
  for _ in $(seq 1 150); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || { cat "$3" >&2; echo "checkers: a process exited at start-up" >&2; exit 1; }
    sleep 0.2
  done
  echo "checkers: $1 did not answer" >&2
  exit 1
}
"$converge" channel-sim --bind "127.0.0.1:$channel_port" --database-url "$work/channel.db" \
  --callback-url "$base/v1/channel/callbacks" --callback-secret "$secret" --slow-ms 800 --hang-ms 800 \
  >"$work/channel.log" 2>&1 &
channel_pid=$!
wait_for "$channel/health" "$channel_pid" "$work/channel.log"
"$converge" serve --bind "127.0.0.1:$port" --channel-url "$channel" --callback-secret "$secret" \
  --channel-timeout-ms 300 --poll-ms 100 --monitor-ms 200 >"$work/serve.log" 2>&1 &
server_pid=$!
wait_for "$base/health" "$server_pid" "$work/serve.log"

# --- promtool check metrics after a workload ------------------------------------------------
if [ "$have_promtool" = 1 ]; then
  echo "checkers: promtool check metrics (/metrics after a workload)" >&2
  pay() { # amount, order, key
    curl -sS -o /dev/null -w '%{http_code}\n' "$base/v1/payments" -H "Authorization: Bearer $key" \
      -H 'Content-Type: application/json' -H "Idempotency-Key: $3" \
      -d "{\"amount\":$1,\"currency\":\"CNY\",\"merchant_order_id\":\"$2\"}"
  }
  # A success, a decline, a slow charge (UNKNOWN, resolved by a query job), a replay, a
  # missing key, a refund, a read and a 404: every family of metric gets samples.
  [ "$(pay 1000 m-1 mk-1)" = 201 ]
  [ "$(pay 1051 m-2 mk-2)" = 201 ]
  [ "$(pay 1052 m-3 mk-3)" = 201 ]
  [ "$(pay 1000 m-1 mk-1)" = 201 ]
  [ "$(curl -sS -o /dev/null -w '%{http_code}' "$base/v1/payments" -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/json' -d '{"amount":1,"currency":"CNY","merchant_order_id":"m-4"}')" = 400 ]
  id=$(curl -fsS "$base/v1/payments" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -H 'Idempotency-Key: mk-5' -d '{"amount":2000,"currency":"CNY","merchant_order_id":"m-5"}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  [ "$(curl -sS -o /dev/null -w '%{http_code}' "$base/v1/payments/$id/refunds" -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/json' -H 'Idempotency-Key: mr-1' -d '{"amount":500,"reason":"checker"}')" = 201 ]
  [ "$(curl -sS -o /dev/null -w '%{http_code}' "$base/v1/payments/$id" -H "Authorization: Bearer $key")" = 200 ]
  [ "$(curl -sS -o /dev/null -w '%{http_code}' "$base/v1/payments/pay_missing" -H "Authorization: Bearer $key")" = 404 ]
  sleep 1.5 # the workers run the query job; the monitor refreshes its gauges
  curl -fsS "$base/metrics" >"$work/metrics.txt"
  for family in converge_http_request_duration_seconds converge_jobs_processed_total \
    converge_stuck_payments converge_jobs converge_database_up converge_idempotency_requests_total; do
    grep -q "^# TYPE $family " "$work/metrics.txt" || { echo "checkers: /metrics has no $family" >&2; exit 1; }
  done
  # promtool exits 0 on lint findings with older versions only when there are none: print them
  # and fail on any output.
  findings=$(promtool check metrics <"$work/metrics.txt" 2>&1) || { echo "$findings" >&2; exit 1; }
  [ -z "$findings" ] || { echo "$findings" >&2; exit 1; }
fi

stop_server
echo "checkers: all passed in $(($(date +%s) - started))s" >&2
