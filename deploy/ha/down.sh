#!/usr/bin/env bash
# Stops what up.sh (and drill.sh) started under $CONVERGE_HA_DIR, clients first: the converge
# servers, the channel, the drill's webhook receiver, HAProxy, NATS, PostgreSQL (Patroni stops
# its own PostgreSQL) and etcd last. Each gets SIGTERM and up to 20 s, then SIGKILL.
# Idempotent: what is not running is skipped. Only pids recorded under $CONVERGE_HA_DIR are
# signalled. `--purge` also deletes the state.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

stop() { # name [grace seconds]
  local name=$1 grace=${2:-20} pid t0
  pid=$(alive_pid "$name") || { rm -f "$(pidfile "$name")"; return 0; }
  kill -TERM "$pid" 2>/dev/null
  t0=$SECONDS
  while running "$pid"; do
    if ((SECONDS - t0 >= grace)); then
      log "$name (pid $pid) still up after ${grace}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null
      break
    fi
    sleep 0.2
  done
  rm -f "$(pidfile "$name")"
  log "stopped $name"
}

[ -d "$D" ] || { log "nothing under $D"; exit 0; }
for i in $(seq 1 8); do stop "serve$i"; done
stop channel
stop sink
stop haproxy 5
for i in 1 2 3; do stop "nats$i"; done
for n in pg2 pg1; do stop "$n" 30; done
# A PostgreSQL left without its Patroni (Patroni was SIGKILLed, e.g. by the drill) is
# stopped by pg_ctl, as the postgres user.
for n in pg1 pg2; do
  if postmaster_pid "$n" >/dev/null; then
    log "stopping $n's orphaned PostgreSQL"
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$D/$n/data" -m fast -w -t 30 stop >/dev/null ||
      kill -KILL "$(postmaster_pid "$n")" 2>/dev/null
  fi
done
for i in 1 2 3; do stop "etcd$i"; done
if [ "${1:-}" = --purge ]; then
  rm -rf "$D"
  log "removed $D"
fi
