# Sourced by bench/bench.sh and bench/console.sh: the settings and builds both need.
# Sets pg (CONVERGE_BENCH_PG_URL, then CONVERGE_TEST_PG_URL, then the local postgres account),
# bin (CONVERGE_BIN, or a release `converge` built with `cargo leptos build --release`; not
# built when the caller sets need_bin=0) and
# t (CONVERGE_BENCH_TOOLS, or the release build of the converge-bench tools); exits when
# PostgreSQL cannot be reached.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PWD/tools/bin:$PWD/tools/node_modules/.bin:$HOME/.cargo/bin:$PATH"

pg=${CONVERGE_BENCH_PG_URL:-${CONVERGE_TEST_PG_URL:-postgres://postgres:postgres@127.0.0.1:5432/postgres}}
command -v psql >/dev/null || { echo "bench: psql is needed (Debian: postgresql-client)" >&2; exit 1; }
psql -X -q "$pg" -c 'select 1' >/dev/null || { echo "bench: cannot reach PostgreSQL at CONVERGE_BENCH_PG_URL" >&2; exit 1; }

if [ "${need_bin:-1}" = 0 ]; then
  bin=""
elif [ -z "${CONVERGE_BIN:-}" ]; then
  echo "bench: building the release binary (cargo leptos build --release --precompress --split)" >&2
  cargo leptos build --release --precompress --split
  bin=target/release/converge
else
  bin=$CONVERGE_BIN
fi
if [ -n "${CONVERGE_BENCH_TOOLS:-}" ]; then
  t=$CONVERGE_BENCH_TOOLS
else
  cargo build --release -p converge-bench
  t=target/release
fi
