#!/usr/bin/env bash
# converge console benchmarks, run on demand (never by the tests); writes its section of
# BENCHMARKS.md (between the console markers; bench/bench.sh keeps it) and the query plans
# under bench/plans/ (issue "Ops console I" and "Ops console II", Performance; issue "Proof",
# benchmarks 5-7):
#   5. the dashboard's and the payment search's queries on 1 M and 10 M payments, p50/p95,
#      through the same Store calls the console makes (bench queries), with their plans;
#   6. `converge audit export` rows/s and peak memory at 1 M audit records (bench export);
#   7. the console's first load, bytes transferred compressed (bench firstload against a
#      release `converge serve`), and its time to interactive in Chromium (end2end/perf/tti.mjs:
#      the sign-in page and the dashboard, cold cache, medians of the performance timeline);
#   8. under load (issue 15): the dashboard and search queries on PostgreSQL at
#      CONVERGE_BENCH_UNDER_LOAD payments while the create benchmark (bench load, a release
#      `converge serve` on the same database) runs at its full rate (bench queries
#      --during-load), p50/p95 beside the creates/s reached meanwhile.
#
# Settings (environment): CONVERGE_BENCH_PG_URL (as bench/bench.sh), CONVERGE_BENCH_SIZES
# (payments per query run, default "1000000 10000000"), CONVERGE_BENCH_AUDIT (audit records,
# 1000000), CONVERGE_BENCH_ITERATIONS (timed runs per query, 100), CONVERGE_BIN (a release
# converge binary built by `cargo leptos build --release`; its site must be at target/site),
# CONVERGE_BENCH_TOOLS (a directory with release builds of queries, export and firstload),
# CONVERGE_BENCH_ONLY=firstload (run part 7 alone and rewrite only its block of the section,
# between the firstload markers; the query and export tables stay as they are),
# CONVERGE_BENCH_ONLY=export, or the argument --export-only (run part 6 alone, the audit export
# on both backends, and rewrite only its block, between the console-export markers),
# CONVERGE_BENCH_TTI_RUNS (cold loads per page and network profile for time to interactive,
# default 7; 0 skips it: it needs end2end/node_modules and Chromium, CONVERGE_CHROMIUM or
# /usr/bin/chromium), CONVERGE_BENCH_UNDER_LOAD (payments for 8, default 10000000; 0 skips it and
# keeps the figures already in BENCHMARKS.md), CONVERGE_BENCH_LOAD_REQUESTS (creates sent during 8,
# 40000: enough to outlast the timed queries), CONVERGE_BENCH_UNDER_LOAD_DB (a PostgreSQL database
# already seeded with that many payments by `bench queries --db postgres --payments N --keep`,
# reused instead of seeding anew), CONVERGE_BENCH_ONLY=under-load (run only 8 and rewrite only its
# block of the console section, between the underload markers).
set -euo pipefail
only=${CONVERGE_BENCH_ONLY:-}
case "${1:-}" in
  --export-only) only=export ;;
  "") ;;
  *) echo "usage: bash bench/console.sh [--export-only]" >&2; exit 2 ;;
esac
case "$only" in "" | firstload | export | under-load) ;; *) echo "bench: CONVERGE_BENCH_ONLY is empty, firstload, export or under-load" >&2; exit 2 ;; esac
tti_runs=${CONVERGE_BENCH_TTI_RUNS:-7}
under=${CONVERGE_BENCH_UNDER_LOAD:-10000000}
[ -n "$only" ] && [ "$only" != under-load ] && under=0
load_reqs=${CONVERGE_BENCH_LOAD_REQUESTS:-40000}
sizes=${CONVERGE_BENCH_SIZES:-1000000 10000000}
audit=${CONVERGE_BENCH_AUDIT:-1000000}
iters=${CONVERGE_BENCH_ITERATIONS:-100}
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"

out=$(mktemp)
work=$(mktemp -d)
server=""
kept_db=""
# Drops the database part 5 kept for part 8 (its URL's last path segment, without a query).
drop_kept() {
  [ -n "$kept_db" ] || return 0
  local name=${kept_db##*/}
  psql -X -q "$pg" -c "DROP DATABASE IF EXISTS \"${name%%\?*}\" WITH (FORCE)" >/dev/null
  kept_db=""
}
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  drop_kept 2>/dev/null || true
  rm -rf "$work" "$out"
}
trap cleanup EXIT
mkdir -p bench/plans
get() { awk -F= -v k="$1" '$1==k {v=$2} END {print (v=="" ? "-" : v)}' "$out"; }
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain 2>/dev/null | grep -q . && echo " (with uncommitted changes)" || true)

# ---- 8: queries under load -------------------------------------------------------------------
# The figures go in their own block inside the console section, kept when this part is skipped.
underload_block() {
  local n=$under
  echo "<!-- underload:begin -->"
  echo "**Under load** (\`bench queries --during-load\`, issue 15): PostgreSQL seeded with $n payments as above,"
  echo "then \`bench load\` drives a release \`converge serve\` on the same database (creates with new keys at"
  echo "concurrency 16, its workers running) while the same queries are timed ($iters runs each, after the same"
  echo "timings with no load); written $(date -u +%Y-%m-%dT%H:%MZ), converge commit $commit$dirty. Times in ms, p50 / p95."
  echo
  echo "| query | idle (same seeding, just before the load) | under load |"
  echo "|---|---|---|"
  # The dashboard's refresh, then each of its reads, then the searches.
  for q in dashboard stuck_counts stuck_oldest queue_stats jobs_done_5m error_pool_open error_counts \
    outcome_counts_24h outcome_series_1h webhook_backlog relay_status \
    search_latest search_status search_merchant search_order_id search_time_range search_page_deep; do
    echo "| $q | $(get "ql.postgres.$n.idle.$q.p50_ms") / $(get "ql.postgres.$n.idle.$q.p95_ms") | $(get "ql.postgres.$n.$q.p50_ms") / $(get "ql.postgres.$n.$q.p95_ms") |"
  done
  echo
  echo "Creates while the queries ran: $(get "ql.postgres.$n.load_window.create_rps") req/s ($(get "ql.postgres.$n.load_window.created") payments in"
  echo "$(get "ql.postgres.$n.load_window.secs") s); the load run as a whole: $(get "ql.postgres.$n.load.create.rps") req/s, p50 / p99"
  echo "$(get "ql.postgres.$n.load.create.p50_ms") / $(get "ql.postgres.$n.load.create.p99_ms") ms, $(get "ql.postgres.$n.load.create.errors") errors. Seeding took $(get "ql.postgres.$n.seed_s") s (- when an already seeded database was reused)."
  echo "Load average (1, 5, 15 min): $(get loadavg.underload.before) at the start of this step, $(get loadavg.underload.after) at its end."
  p95=$(awk -F= -v p="ql.postgres.$n." 'index($1, p) == 1 && index($1, p "idle.") != 1 && ($1 ~ /dashboard\.p95_ms$/ || $1 ~ /search_[a-z_]*\.p95_ms$/) { if ($2+0 > m) m = $2+0 } END { print m+0 }' "$out")
  echo
  echo "Slowest dashboard or search p95 under load: $p95 ms (goal: < 50 ms): $(awk -v v="$p95" -v r="$(get "ql.postgres.$n.load_window.create_rps")" 'BEGIN { print (r == "-" ? "not measured" : (v < 50 ? "met" : "NOT met")) }')."
  echo "<!-- underload:end -->"
}
# Seeding 10 M payments on PostgreSQL takes about 15 minutes, so part 8 reuses the database
# part 5 seeded at the same size (kept by `queries --keep`, dropped after part 8), or the one
# CONVERGE_BENCH_UNDER_LOAD_DB names (never dropped); it seeds its own only when neither exists.
under_db=${CONVERGE_BENCH_UNDER_LOAD_DB:-}
run_under_load() {
  [ "$under" != 0 ] || return 0
  echo "bench: console queries on $under payments (postgres) during the create benchmark" >&2
  printf 'loadavg.underload.before=%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out"
  reuse=()
  [ -n "$under_db" ] && reuse=(--database-url "$under_db")
  $t/queries --db postgres --pg-url "$pg" --payments "$under" --iterations "$iters" --label "ql.postgres.$under" \
    "${reuse[@]}" --during-load --converge "$bin" --load-bin "$t/load" --load-requests "$load_reqs" | tee -a "$out"
  printf 'loadavg.underload.after=%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out"
  drop_kept
}

if [ "$only" = under-load ]; then
  run_under_load
else
# ---- 5: queries ------------------------------------------------------------------------------
[ -n "$only" ] && sizes=""
for n in $sizes; do
  for db in sqlite postgres; do
    echo "bench: console queries on $n payments ($db)" >&2
    plan="bench/plans/$db-$n.md"
    {
      echo "# Query plans: $db, $n payments"
      echo
      echo "Written by \`bash bench/console.sh\` (\`bench queries --explain\`): each console query exactly as the"
      echo "store runs it, with the benchmark's arguments. PostgreSQL: \`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)\`;"
      echo "SQLite: \`EXPLAIN QUERY PLAN\`."
      echo
    } >"$plan"
    keep=()
    [ "$db" = postgres ] && [ "$n" = "$under" ] && [ -z "$under_db" ] && keep=(--keep)
    $t/queries --db "$db" --pg-url "$pg" --payments "$n" --iterations "$iters" --label "q.$db.$n" \
      --explain "$work/plan.md" "${keep[@]}" 2>"$work/queries.err" | tee -a "$out"
    cat "$work/queries.err" >&2
    cat "$work/plan.md" >>"$plan"
    if [ ${#keep[@]} -gt 0 ]; then
      kept_db=$(sed -n 's/^queries: kept //p' "$work/queries.err" | tail -n1)
      under_db=$kept_db
    fi
  done
done
run_under_load

# ---- 6: audit export -------------------------------------------------------------------------
# `export` prints the 1-minute load average just before each timed export (after its seeding).
export_dbs="sqlite postgres"
[ "$only" = firstload ] && export_dbs=""
for db in $export_dbs; do
  echo "bench: audit export of $audit records ($db)" >&2
  $t/export --converge "$bin" --db "$db" --pg-url "$pg" --records "$audit" --label "export.$db" | tee -a "$out"
done

# ---- BENCHMARKS.md, benchmark 6 --------------------------------------------------------------
exportpart="$work/export.md"
{
  echo "<!-- console-export:begin -->"
  echo "**Audit export** (\`bench export\`, $(date -u +%Y-%m-%dT%H:%MZ), converge commit $commit$dirty): $audit chained"
  echo "records seeded, then the real \`converge audit export\` (the stream \`GET /ops/v1/audit/export\` serves) read"
  echo "to the end by the benchmark; peak memory is the export process's maximum resident set (\`wait4\` rusage)."
  echo "\`converge audit verify\` then re-computes the chain. \"load\" is the 1-minute load average just before"
  echo "each export (2 CPUs; above 1, other work ran beside it and the figure is low)."
  echo
  echo "| backend | CSV rows/s | CSV MiB | CSV peak RSS MiB | CSV load | NDJSON rows/s | NDJSON peak RSS MiB | NDJSON load | verify rows/s |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for db in sqlite postgres; do
    echo "| $db | $(get "export.$db.csv.rows_per_s") | $(get "export.$db.csv.mib") | $(get "export.$db.csv.peak_rss_mib") | $(get "export.$db.csv.loadavg") | $(get "export.$db.ndjson.rows_per_s") | $(get "export.$db.ndjson.peak_rss_mib") | $(get "export.$db.ndjson.loadavg") | $(get "export.$db.verify.rows_per_s") |"
  done
  echo
  verdict() {
    awk -v c="$(get "export.$1.csv.rows_per_s")" -v n="$(get "export.$1.ndjson.rows_per_s")" \
      -v cm="$(get "export.$1.csv.peak_rss_mib")" -v nm="$(get "export.$1.ndjson.peak_rss_mib")" \
      'BEGIN { print ((c+0 >= 200000 && n+0 >= 200000 && cm != "-" && nm != "-" && cm+0 < 64 && nm+0 < 64) ? "met" : "NOT met") }'
  }
  echo "Goal: >= 200,000 rows/s with peak memory < 64 MiB, CSV and NDJSON: SQLite $(verdict sqlite), PostgreSQL $(verdict postgres)."
  echo "<!-- console-export:end -->"
} >"$exportpart"

if [ "$only" = export ]; then
  grep -q '^<!-- console-export:begin -->' BENCHMARKS.md || { echo "bench: no console-export markers in BENCHMARKS.md: run without --export-only" >&2; exit 1; }
  awk -v f="$exportpart" '
    /^<!-- console-export:begin -->/ { while ((getline l < f) > 0) print l; skip = 1; next }
    /^<!-- console-export:end -->/ { skip = 0; next }
    !skip { print }' BENCHMARKS.md >"$work/b.md"
  cp "$work/b.md" BENCHMARKS.md
  echo "bench: BENCHMARKS.md updated (audit export)" >&2
  exit 0
fi

# ---- 7: first load ---------------------------------------------------------------------------
echo "bench: console first load" >&2
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The time-to-interactive runs sign in as a viewer to reach the dashboard, and as an approver
# for the phone's approvals page.
tti_password=bench-tti-password-1
echo "$tti_password" | DATABASE_URL="$work/converge.db" "$bin" user add bench-tti --role viewer,approver --password-stdin >/dev/null
LEPTOS_SITE_ROOT=target/site LEPTOS_SITE_ADDR="127.0.0.1:$port" RUST_LOG=warn \
  "$bin" serve --bind "127.0.0.1:$port" --database-url "$work/converge.db" --channel-db "$work/channel.db" >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  sleep 0.2
done
$t/firstload --url "http://127.0.0.1:$port/" --label firstload | tee -a "$out"
if [ "$tti_runs" -gt 0 ]; then
  echo "bench: console time to interactive ($tti_runs cold loads per page and profile)" >&2
  BENCH_TTI_PASSWORD=$tti_password node end2end/perf/tti.mjs --url "http://127.0.0.1:$port" \
    --user bench-tti --password-env BENCH_TTI_PASSWORD --runs "$tti_runs" --label tti | tee -a "$out"
fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
kill "$server"; wait "$server" 2>/dev/null || true; server=""
fi

# ---- BENCHMARKS.md ---------------------------------------------------------------------------
kb() { awk -v b="$1" 'BEGIN { if (b == "-") print "-"; else printf "%.1f", b/1024 }'; }
cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)

# The first-load block, between its own markers so that CONVERGE_BENCH_ONLY=firstload can
# rewrite it alone.
ms() { v=$(get "$1"); [ "$v" = "-" ] && echo "-" || echo "$v"; }
# Not written when this run measured the under-load block alone: it has no first-load figures,
# and its greps finding nothing would end the script (pipefail) before that block is written.
[ "$only" = under-load ] || {
  echo "<!-- firstload:begin -->"
  echo "**First load** (\`bench firstload\`): the sign-in page a browser lands on and the stylesheet, script"
  echo "and WebAssembly it loads, from a release \`converge serve\`, with \`Accept-Encoding: br, gzip\` (as sent)"
  echo "and without. KiB."
  echo
  echo "| file | encoding | compressed | uncompressed |"
  echo "|---|---|---|---|"
  grep '^firstload\..*\.encoding=' "$out" | sed -E 's/^firstload\.(.*)\.encoding=.*/\1/' | while read -r f; do
    echo "| $f | $(get "firstload.$f.encoding") | $(kb "$(get "firstload.$f.compressed_bytes")") | $(kb "$(get "firstload.$f.identity_bytes")") |"
  done
  total=$(get firstload.total.compressed_bytes)
  echo "| **total** | | **$(kb "$total")** | $(kb "$(get firstload.total.identity_bytes)") |"
  echo
  echo "Goal: <= 300 KB compressed: $(awk -v b="$total" 'BEGIN { print (b+0 <= 300000 ? "met" : "NOT met") }')."
  echo
  echo "Measured $(date -u +%Y-%m-%dT%H:%MZ), commit $commit$dirty. Load average (1, 5, 15 min):"
  echo "$load_before before, $load_after after (anything else running shares the 2 CPUs and skews the times)."
  if [ "$tti_runs" -gt 0 ]; then
    echo
    echo "**Time to interactive** (\`end2end/perf/tti.mjs\`, Chromium $(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}'),"
    echo "headless): each load in a new browser context with the cache disabled, after one discarded warm-up;"
    echo "medians of $tti_runs loads, ms from navigation start, read from the page's \`performance\` timeline:"
    echo "the document's responseEnd, domContentLoadedEventEnd, loadEventEnd, the \`.wasm\` resource's"
    echo "responseEnd, and the \`converge:hydrated\` mark that \`hydrate()\` sets once hydration has finished"
    echo "(the page's handlers are attached: it is interactive). \"local\" is the loopback without throttling (the"
    echo "CPU part: compiling the WebAssembly and hydrating); \"10 Mbit/s\" is Chromium's network emulation at"
    echo "10 Mbit/s down, 40 ms round trip. The dashboard is \`/\` opened with the session of an earlier sign-in."
    echo "The \`load\` event does not wait for the WebAssembly: the module script fetches it with \`fetch\`."
    echo
    echo "| page | network | document | DOMContentLoaded | load | wasm downloaded | hydrated |"
    echo "|---|---|---|---|---|---|---|"
    for pg_ in login dashboard; do
      for prof in local net; do
        name=$([ "$prof" = local ] && echo local || echo "10 Mbit/s")
        k="tti.$pg_.$prof"
        echo "| $pg_ | $name | $(ms "$k.response_end_ms") | $(ms "$k.dcl_ms") | $(ms "$k.load_ms") | $(ms "$k.wasm_ms") | **$(ms "$k.hydrated_ms")** |"
      done
    done
    echo
    echo "**The phone approver** (issue 41): \`/approvals\` at 390 x 844 px with an approver's session, over"
    echo "Chromium DevTools' presets \"Fast 4G\" (8.1 Mbit/s down, 165 ms) and \"Slow 4G\" (the former \"Fast 3G\":"
    echo "1.44 Mbit/s, 562.5 ms). Its Approve shows at first contentful paint and works once hydrated. Goal at"
    echo "4G: working under 2,000 ms."
    echo
    echo "| network | document | first paint (Approve visible) | wasm downloaded | hydrated (Approve works) |"
    echo "|---|---|---|---|---|"
    for prof in 4g 3g; do
      k="tti.approvals.$prof"
      echo "| $(echo "$prof" | tr g G) | $(ms "$k.response_end_ms") | $(ms "$k.fcp_ms") | $(ms "$k.wasm_ms") | **$(ms "$k.hydrated_ms")** |"
    done
  fi
  echo "<!-- firstload:end -->"
} >"$work/firstload.md"

# The under-load block: this run's, or the one already in BENCHMARKS.md.
block="$work/underload.md"
if [ "$under" != 0 ]; then
  underload_block >"$block"
elif [ -f BENCHMARKS.md ]; then
  sed -n '/^<!-- underload:begin -->/,/^<!-- underload:end -->/p' BENCHMARKS.md >"$block"
else
  : >"$block"
fi
if [ "$only" = under-load ]; then
  grep -q '^<!-- console:end -->' BENCHMARKS.md 2>/dev/null ||
    { echo "bench: CONVERGE_BENCH_ONLY=under-load updates the console section of an existing BENCHMARKS.md" >&2; exit 1; }
  awk -v f="$block" '
    /^<!-- underload:begin -->/ { skip = 1; next }
    /^<!-- underload:end -->/ { skip = 0; next }
    skip { next }
    /^<!-- console:end -->/ { while ((getline l < f) > 0) print l }
    { print }' BENCHMARKS.md >"$work/b.md"
  cp "$work/b.md" BENCHMARKS.md
  echo "bench: BENCHMARKS.md updated (under-load figures)" >&2
  exit 0
fi

section="$work/section.md"
{
  echo "<!-- console:begin -->"
  echo "## Console queries, audit export, first load (benchmarks 5-7)"
  echo
  echo "Written by \`bash bench/console.sh\`: $(date -u +%Y-%m-%dT%H:%MZ), converge commit $commit$dirty,"
  echo "$(nproc) CPUs ($cpu), PostgreSQL $(psql -X -qtA "$pg" -c 'SHOW server_version') on the same machine."
  echo
  echo "**Queries** (\`bench queries\`): the seeded history is 100 merchants over 30 days, 97 % SUCCESS, 1 % FAILED,"
  echo "1 % REFUNDED, 0.1 % stuck in the five non-terminal states, two done jobs per settled payment and a due"
  echo "query job per stuck one, an open error-pool item per 10,000 payments. Each query runs $iters times after a"
  echo "warm-up through the same \`Store\` call the console makes; \"dashboard\" is the whole read model one"
  echo "refresh computes (stuck counts and oldest, hit rates and series, queue, error pool). Times in ms, p50 / p95."
  echo "Plans: [bench/plans/](bench/plans/)."
  echo
  header="| query |"
  rule="|---|"
  for n in $sizes; do
    header="$header SQLite $n | PostgreSQL $n |"
    rule="$rule---|---|"
  done
  echo "$header"
  echo "$rule"
  for q in dashboard stuck_counts stuck_oldest queue_stats jobs_done_5m error_pool_open payment_by_id \
    search_latest search_status search_merchant search_order_id search_time_range search_page_deep; do
    row="| $q |"
    for n in $sizes; do
      for db in sqlite postgres; do
        row="$row $(get "q.$db.$n.$q.p50_ms") / $(get "q.$db.$n.$q.p95_ms") |"
      done
    done
    echo "$row"
  done
  echo
  worst=""
  for n in $sizes; do worst=$n; done
  p95=$(awk -F= -v p="q.postgres.$worst." 'index($1, p) == 1 && $1 ~ /p95_ms$/ { if ($2+0 > m) m = $2+0 } END { print m+0 }' "$out")
  echo "Slowest p95 on PostgreSQL at $worst payments: $p95 ms (goal: < 50 ms): $(awk -v v="$p95" 'BEGIN { print (v < 50 ? "met" : "NOT met") }')."
  echo
  cat "$exportpart"
  echo
  cat "$work/firstload.md"
  [ -s "$block" ] && { echo; cat "$block"; }
  echo "<!-- console:end -->"
} >"$section"

if [ "$only" = firstload ]; then
  grep -q '^<!-- firstload:begin -->' BENCHMARKS.md ||
    { echo "bench: BENCHMARKS.md has no firstload block; run bench/console.sh in full once" >&2; exit 1; }
  awk -v f="$work/firstload.md" '
    /^<!-- firstload:begin -->/ { while ((getline l < f) > 0) print l; skip = 1; next }
    /^<!-- firstload:end -->/ { skip = 0; next }
    !skip { print }' BENCHMARKS.md >"$work/b.md"
elif [ -f BENCHMARKS.md ] && grep -q '^<!-- console:begin -->' BENCHMARKS.md; then
  awk -v f="$section" '
    /^<!-- console:begin -->/ { while ((getline l < f) > 0) print l; skip = 1; next }
    /^<!-- console:end -->/ { skip = 0; next }
    !skip { print }' BENCHMARKS.md >"$work/b.md"
elif [ -f BENCHMARKS.md ] && grep -q '^<!-- notes -->' BENCHMARKS.md; then
  awk -v f="$section" '
    /^<!-- notes -->/ { while ((getline l < f) > 0) print l; print "" }
    { print }' BENCHMARKS.md >"$work/b.md"
else
  { [ -f BENCHMARKS.md ] && cat BENCHMARKS.md; echo; cat "$section"; } >"$work/b.md"
fi
cp "$work/b.md" BENCHMARKS.md
echo "bench: BENCHMARKS.md updated (console section)" >&2
