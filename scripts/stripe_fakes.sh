# Sourced by scripts/test.sh: installs and starts two third-party Stripe fakes for the Stripe
# connector's tests, each a separate process on a fixed loopback port, and exports:
#   CONVERGE_LOCALSTRIPE_URL  http://127.0.0.1:12110  localstripe (PyPI), PaymentIntents API
#   CONVERGE_STRIPE_MOCK_URL  http://127.0.0.1:12111  stripe-stateful-mock (npm), Charges API
#   CONVERGE_STRIPE_SIGNER    scripts/stripe_sign.mjs: Stripe-Signature header values made by
#                             the official `stripe` npm library (webhook tests)
# Two fakes written by others, not one of ours, so the connector is checked against someone
# else's reading of Stripe's API; neither is Stripe (see what each gets wrong in the connector's
# notes), and neither is a substitute for a run against Stripe's test mode.
#
# Call `stripe_fakes_setup` after scripts/setup.sh (which runs `npm ci` in tools/) and with
# `fail_or_skip` defined (scripts/test.sh): a fake that cannot be installed or started is a
# skip, or a failure under CONVERGE_STRICT=1, and its variable stays unset.
#
# Running it twice starts no duplicates: a port that already answers as the right fake is
# reused (both fakes keep state in memory, so tests must use fresh keys and metadata, never
# count objects). The servers are left running when the shell exits; `stripe_fakes_stop` ends
# the ones this script started (by the pids it wrote), nothing else.
#
# Ports: fixed, below Linux's ephemeral range (32768-60999) so no outgoing connection holds
# them, and used by nothing else in converge (e2e 3300/3301, PostgreSQL 5432). Override with
# CONVERGE_LOCALSTRIPE_PORT / CONVERGE_STRIPE_MOCK_PORT. A URL already set in the environment
# (a fake run elsewhere) is used as given and nothing is started for it.

# localstripe is GPL-3.0: it is installed from PyPI and run as a separate process only; none
# of its code is copied into converge. Pinned, in a venv under tools/ like nats-server.
LOCALSTRIPE_VERSION=1.15.10
# stripe-stateful-mock (MIT) and stripe are pinned in tools/package.json and
# tools/package-lock.json (npm install --save-exact); 0.0.16 is the newest stripe-stateful-mock
# on the registry and runs on Node 20; stripe 23 needs Node >= 20.

_stripe_fakes_warn() {
  if declare -F fail_or_skip >/dev/null; then
    fail_or_skip "$1"
  else
    echo "stripe_fakes: WARNING: $1" >&2
  fi
}

# Is a localstripe at $1? Its /v1/balance answers with a balance; stripe-stateful-mock has no
# such route (404), so the two can never be mistaken for each other on a reused port.
_stripe_fakes_is_localstripe() {
  curl -fsS --max-time 2 -u sk_test_probe: "$1/v1/balance" 2>/dev/null | grep -q '"available"'
}
# Is a stripe-stateful-mock at $1? Its authenticated GET / says "Hello world".
_stripe_fakes_is_mock() {
  curl -fsS --max-time 2 -u sk_test_probe: "$1/" 2>/dev/null | grep -q 'Hello world'
}
# Does anything answer HTTP on $1 (any status)?
_stripe_fakes_port_busy() {
  [ "$(curl -sS --max-time 2 -o /dev/null -w '%{http_code}' "$1/" 2>/dev/null)" != 000 ]
}

# _stripe_fakes_start NAME URL PROBE LOG PIDFILE -- COMMAND...: reuses a server that already
# answers PROBE at URL, else starts COMMAND detached (its own session, so a Ctrl-C of the
# test run does not end a server a later run may reuse) and waits up to 15 s for PROBE.
_stripe_fakes_start() {
  local name=$1 url=$2 probe=$3 log=$4 pidfile=$5
  shift 6
  if "$probe" "$url"; then
    echo "stripe_fakes: reusing the $name already at $url" >&2
    return 0
  fi
  if _stripe_fakes_port_busy "$url"; then
    echo "stripe_fakes: something that is not $name answers at $url" >&2
    return 1
  fi
  echo "stripe_fakes: starting $name at $url (log: $log)" >&2
  setsid "$@" </dev/null >"$log" 2>&1 &
  echo $! >"$pidfile"
  local _
  for _ in $(seq 1 75); do
    "$probe" "$url" && return 0
    kill -0 "$(cat "$pidfile")" 2>/dev/null || break
    sleep 0.2
  done
  echo "stripe_fakes: $name did not answer at $url; its log:" >&2
  tail -n 20 "$log" >&2
  return 1
}

stripe_fakes_setup() {
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  local run_dir=${CONVERGE_STRIPE_FAKES_DIR:-${TMPDIR:-/tmp}/converge-stripe-fakes}
  mkdir -p "$run_dir"
  local ls_port=${CONVERGE_LOCALSTRIPE_PORT:-12110} mock_port=${CONVERGE_STRIPE_MOCK_PORT:-12111}

  # localstripe, pinned, in tools/localstripe-venv (the venv's own pip; nothing system-wide).
  local venv="$root/tools/localstripe-venv"
  if [ -z "${CONVERGE_LOCALSTRIPE_URL:-}" ]; then
    if [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("localstripe"))' 2>/dev/null)" != "$LOCALSTRIPE_VERSION" ]; then
      echo "stripe_fakes: installing localstripe $LOCALSTRIPE_VERSION (PyPI) into tools/localstripe-venv" >&2
      (python3 -m venv "$venv" && "$venv/bin/pip" install -q "localstripe==$LOCALSTRIPE_VERSION") ||
        _stripe_fakes_warn "localstripe $LOCALSTRIPE_VERSION could not be installed"
    fi
    if [ -x "$venv/bin/localstripe" ]; then
      # --from-scratch: localstripe otherwise reloads the store it pickles to
      # /tmp/localstripe.pickle after every request (a fixed path: one localstripe per machine,
      # which is one more reason to reuse a running one rather than start a second).
      if _stripe_fakes_start localstripe "http://127.0.0.1:$ls_port" _stripe_fakes_is_localstripe \
        "$run_dir/localstripe.log" "$run_dir/localstripe.pid" -- \
        "$venv/bin/localstripe" --port "$ls_port" --from-scratch; then
        export CONVERGE_LOCALSTRIPE_URL="http://127.0.0.1:$ls_port"
      else
        _stripe_fakes_warn "localstripe did not start on port $ls_port"
      fi
    fi
  fi

  # The npm packages: tools/package.json pins them; `npm ci` there (re)installs exactly the
  # lock file when any installed version differs from its pin. scripts/setup.sh runs `npm ci`
  # only when wasm-opt is missing, so a machine set up before these pins needs this.
  local npm_ok=1
  if ! command -v node >/dev/null 2>&1; then
    _stripe_fakes_warn "no node: stripe-stateful-mock and the webhook signer need Node >= 20"
    npm_ok=0
  elif ! (cd "$root/tools" && node -e '
      const deps = require("./package.json").dependencies;
      for (const [n, v] of Object.entries(deps))
        if (require("./node_modules/" + n + "/package.json").version !== v) process.exit(1);' 2>/dev/null); then
    echo "stripe_fakes: installing tools/ npm packages (npm ci: stripe-stateful-mock, stripe)" >&2
    (cd "$root/tools" && npm ci --no-audit --no-fund --silent) || {
      _stripe_fakes_warn "npm ci in tools/ failed"
      npm_ok=0
    }
  fi

  if [ "$npm_ok" = 1 ] && [ -z "${CONVERGE_STRIPE_MOCK_URL:-}" ]; then
    # The port comes from PORT (the package's autostart); LOG_LEVEL=warn keeps its log short.
    if _stripe_fakes_start stripe-stateful-mock "http://127.0.0.1:$mock_port" _stripe_fakes_is_mock \
      "$run_dir/stripe-stateful-mock.log" "$run_dir/stripe-stateful-mock.pid" -- \
      env PORT="$mock_port" LOG_LEVEL=warn node "$root/tools/node_modules/stripe-stateful-mock/dist/cli.js"; then
      export CONVERGE_STRIPE_MOCK_URL="http://127.0.0.1:$mock_port"
    else
      _stripe_fakes_warn "stripe-stateful-mock did not start on port $mock_port"
    fi
  fi

  # The webhook signer, checked once against a known answer: HMAC-SHA256 of "1.{}" under the
  # key "k" (Python's hmac module and openssl agree on it).
  if [ "$npm_ok" = 1 ]; then
    if [ "$(printf '{}' | node "$root/scripts/stripe_sign.mjs" --secret k --timestamp 1 2>/dev/null)" = \
      "t=1,v1=3dd49b2593d0f9a349e9e71c4bde3e2b862c2be4003fe9b4ba81332029310158" ]; then
      export CONVERGE_STRIPE_SIGNER="$root/scripts/stripe_sign.mjs"
    else
      _stripe_fakes_warn "scripts/stripe_sign.mjs does not sign (is stripe installed in tools/?)"
    fi
  fi
  return 0
}

# Ends the fakes this script started (the pids in its run directory), nothing else.
stripe_fakes_stop() {
  local run_dir=${CONVERGE_STRIPE_FAKES_DIR:-${TMPDIR:-/tmp}/converge-stripe-fakes} f
  for f in "$run_dir/localstripe.pid" "$run_dir/stripe-stateful-mock.pid"; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
    rm -f "$f"
  done
  return 0
}
