# Sourced by scripts/test.sh: makes sure a local PostgreSQL cluster runs and has a test role
# that may create databases, then exports CONVERGE_TEST_PG_URL. Each test creates (and
# this script first drops the leftovers of) its own converge_test_* database.
# Needs root (apt-get, pg_ctlcluster); otherwise set CONVERGE_TEST_PG_URL yourself.

pg_setup() {
  if ! command -v pg_lsclusters >/dev/null 2>&1; then
    echo "test: installing PostgreSQL (Debian package)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null || return 1
  fi
  local line ver name state
  line=$(pg_lsclusters --no-header | head -n 1)
  if [ -z "$line" ]; then
    ver=$(ls /usr/lib/postgresql | sort -n | tail -n 1)
    pg_createcluster "$ver" main >/dev/null || return 1
    line=$(pg_lsclusters --no-header | head -n 1)
  fi
  read -r ver name _ state _ <<<"$line"
  if [ "$state" != "online" ]; then
    pg_ctlcluster "$ver" "$name" start || return 1
  fi
  local port
  port=$(pg_lsclusters --no-header | awk -v v="$ver" -v n="$name" '$1==v && $2==n {print $3}')
  su postgres -c "psql -p $port -qtA" >/dev/null <<'SQL' || return 1
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'converge_test') THEN
    CREATE ROLE converge_test LOGIN CREATEDB PASSWORD 'converge_test';
  END IF;
END $$;
-- DROP DATABASE ... WITH (FORCE) must end an autovacuum worker that is in the database;
-- PostgreSQL 15 lets a plain role do that only through pg_signal_backend.
GRANT pg_signal_backend TO converge_test;
SQL
  # Leftovers of earlier runs: databases made over 3 hours ago (a CI run ends within 90
  # minutes), so a second test run on the same cluster keeps the databases of one in progress.
  # A database's PG_VERSION file is written when it is created.
  su postgres -c "psql -p $port -qtA -c \"SELECT datname FROM pg_database WHERE datname LIKE 'converge_test_%' AND (pg_stat_file('base/' || oid || '/PG_VERSION')).modification < now() - interval '3 hours'\"" |
    while read -r db; do
      [ -n "$db" ] && su postgres -c "psql -p $port -qc 'DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)'" >/dev/null
    done
  export CONVERGE_TEST_PG_URL="postgres://converge_test:converge_test@127.0.0.1:${port}/postgres"
}
