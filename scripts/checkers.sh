#!/usr/bin/env bash
# External checkers of converge's contracts (issue 16), run by scripts/test.sh after the binary
# is built: tools not written here check what converge publishes.
#
#   promtool (Debian `prometheus`): `check rules` and `test rules` on deploy/prometheus/,
#   and `check metrics` on a running server's /metrics after a small workload.
#   schemathesis (PyPI, pinned, in .venv-schemathesis): every phase and its default checks
#   against /openapi.json, first the merchant API with a merchant key, then the ops API with
#   a console session; then `converge verify` on the database it left.
#
# Starts its own `converge channel-sim` and `converge serve` ($CONVERGE_BIN, default
# target/debug/converge; scripts/test.sh passes the release binary; either must
# be built) on free ports with their databases in a temporary directory, and stops them on
# exit. Any finding fails the script. CONVERGE_STRICT=1 turns a missing checker into a failure
# instead of a skip. SCHEMATHESIS_MAX_EXAMPLES (default 10) bounds the cases per operation.
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

# --- installs (before the network namespace below, which has no route to the registries) ----
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
schemathesis_version=4.32.5
venv=.venv-schemathesis
if [ ! -x "$venv/bin/st" ] || ! "$venv/bin/st" --version 2>/dev/null | grep -q "$schemathesis_version"; then
  echo "checkers: installing schemathesis $schemathesis_version into $venv" >&2
  (python3 -m venv "$venv" && "$venv/bin/pip" install -q "schemathesis==$schemathesis_version") ||
    echo "checkers: could not install schemathesis" >&2
fi

# --- a network namespace with only loopback ---------------------------------------------------
# schemathesis registers webhook endpoints with URLs it makes up, and converge then delivers
# payment events to them: a made-up public address must never be reached from here, and a
# made-up host name must not go to a DNS server. So the servers and the checkers run in a
# network namespace of their own (unshare, as root), where only 127.0.0.1 exists: every other
# address is unreachable and no name resolves (converge answers 400 url_address_refused,
# documented: one code for an internal and an unresolvable host). One name does resolve there, through a private
# /etc/hosts in a mount namespace of its own: the document's example host, to a public
# address, so the example registration succeeds and schemathesis follows its links (read,
# rotate, delete) with a real endpoint; its deliveries fail at once (no route) and go dead
# after the short retry schedule below. Without a namespace, the webhook endpoint routes are
# left out of the merchant run (a failure under CONVERGE_STRICT=1).
netns_exclude=()
if [ "${CONVERGE_CHECKERS_NETNS:-}" != 1 ]; then
  if command -v ip >/dev/null && unshare --net --mount true 2>/dev/null; then
    exec unshare --net --mount -- env CONVERGE_CHECKERS_NETNS=1 bash "$PWD/scripts/checkers.sh" "$@"
  fi
  fail_or_skip "no network namespace (unshare --net needs root; ip needs iproute2): the webhook endpoint routes"
  netns_exclude=(--exclude-path-regex '^/v1/webhook_endpoints')
else
  ip link set lo up
  hosts=$(mktemp)
  printf '127.0.0.1 localhost\n::1 localhost\n93.184.215.14 shop.example.com\n' >"$hosts"
  mount --bind "$hosts" /etc/hosts
fi

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
  if [ -n "${hosts:-}" ]; then rm -f "$hosts"; fi
}
trap cleanup EXIT

# --- promtool -------------------------------------------------------------------------------
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
  --channel-timeout-ms 300 --poll-ms 100 --monitor-ms 200 --webhook-retry-schedule 0s,100ms,200ms \
  >"$work/serve.log" 2>&1 &
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

# --- schemathesis ---------------------------------------------------------------------------
if [ -x "$venv/bin/st" ]; then
  st_run() { # extra arguments; the operations and credentials differ between the two runs
    # scripts/schemathesis_hooks.py: a fresh Idempotency-Key for each schema-valid request,
    # as the contract asks of a client (it says why).
    PYTHONPATH="$PWD/scripts" SCHEMATHESIS_HOOKS=schemathesis_hooks \
      "$venv/bin/st" --config-file scripts/schemathesis.toml run "$base/openapi.json" --url "$base" \
      --phases examples,coverage,fuzzing,stateful \
      --max-examples "${SCHEMATHESIS_MAX_EXAMPLES:-10}" --seed 16 --workers 1 \
      --generation-database none --request-timeout 10 --no-color "$@"
  }
  # A console session for the ops run, signed in as the console does (POST /ops/v1/login with
  # the Origin header a browser sends). The user holds every role, so no operation is refused
  # for a missing one.
  ops_user=checker-ops
  ops_password=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
  echo "$ops_password" | "$converge" user add "$ops_user" --role viewer,operator,approver,auditor,admin \
    --password-stdin >/dev/null
  cookie=$(curl -fsS -D - -o /dev/null "$base/ops/v1/login" -H "Origin: $base" \
    -H 'Content-Type: application/json' -d "{\"username\":\"$ops_user\",\"password\":\"$ops_password\"}" |
    tr -d '\r' | sed -n 's/^[Ss]et-[Cc]ookie: \(converge_session=[^;]*\).*/\1/p')
  [ -n "$cookie" ] || { echo "checkers: console sign-in failed" >&2; exit 1; }
  export CONVERGE_CHECKER_MERCHANT_KEY="$key" CONVERGE_CHECKER_SESSION="${cookie#converge_session=}"

  echo "checkers: schemathesis, merchant API (/v1, /health) with a merchant key" >&2
  st_run --include-path-regex '^/(v1/|health$)' "${netns_exclude[@]}"
  # The payments it created settle (slow and timed-out charges are queried), then the
  # convergence invariants must hold on what it left.
  sleep 3
  echo "checkers: converge verify after schemathesis" >&2
  "$converge" verify --database-url "$DATABASE_URL" --channel-url "$channel"

  # The ops API with the session and the Origin header (the CSRF guard stays on). Logout is
  # left out: it would end the session the rest of the run uses. So is the live event stream:
  # with a session it never ends, and the request timeout would count that as a failure
  # (server/tests/it/live.rs covers it).
  echo "checkers: schemathesis, ops API (/ops/v1) with a console session" >&2
  st_run --include-path-regex '^/ops/v1/' --exclude-path /ops/v1/logout --exclude-path /ops/v1/live \
    -H "Origin: $base"
  "$converge" verify --database-url "$DATABASE_URL" --channel-url "$channel"
else
  fail_or_skip "schemathesis is not installed and could not be installed"
fi

stop_server
echo "checkers: all passed in $(($(date +%s) - started))s" >&2
