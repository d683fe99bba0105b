#!/usr/bin/env bash
# The drill's ops pair (maker-checker, DESIGN.md "Ops console"): an operator requests the
# reversal of each payment the merchant workload lists in OUT_DIR/to_reverse.tsv, and an
# approver (a different person) approves it with the password, through HAProxy and the ops
# API, retrying through the kills as a person at the console would:
#   - a lost answer (no answer, 5xx, 429) is tried again; a request found already made (409)
#     after a lost answer is the operator's own and is approved;
#   - an approval refused after a lost answer is read back (GET the action): approved or
#     failed (the server died between the approval and its execution) is run with execute,
#     executed is done, stale is counted;
#   - a session lost (401) signs in again.
# Runs until the file $STOP exists and every listed payment is handled.
#
#   ops.sh OUT_DIR        (reads $D/converge/ops.operator and ops.approver: `name password`)
#
# Appends to OUT_DIR/ops_attempts.tsv one line per HTTP attempt:
#   epoch_ms  step  payment_id  attempt  http_code  error_code  action_id  action_status  sent_ms
# and to OUT_DIR/reversal_acks.tsv one line per payment handled:
#   epoch_ms  payment_id  action_id  outcome   (executed | stale | refused | gave-up)
set -uo pipefail
. "$(dirname "$0")/lib.sh"
out=$1
: "${STOP:=$out/stop}" "${RETRY_SECS:=120}"
api="http://$HAPROXY_HOST:$HAPROXY_API_PORT/ops/v1"
read -r op_name op_password <"$D/converge/ops.operator"
read -r ap_name ap_password <"$D/converge/ops.approver"
jar_op=$out/ops.operator.cookies jar_ap=$out/ops.approver.cookies
body_file=$(mktemp)
trap 'rm -f "$body_file"' EXIT
touch "$out/to_reverse.tsv" "$out/reversal_acks.tsv"

# call STEP PAYMENT TRY JAR METHOD PATH [BODY]: one attempt, logged; sets $code $err $aid
# $astatus from the answer.
call() {
  local step=$1 pay=$2 try=$3 jar=$4 method=$5 path=$6 body=${7:-} sent
  sent=$(date +%s%3N)
  if [ "$method" = GET ]; then
    code=$(curl -s -o "$body_file" -w '%{http_code}' --max-time 15 -b "$jar" "$api$path")
  else
    code=$(curl -s -o "$body_file" -w '%{http_code}' --max-time 15 -b "$jar" -c "$jar" \
      -X "$method" "$api$path" -H 'Content-Type: application/json' -d "$body")
  fi
  read -r err aid astatus < <(jq -r '[(.error.code // "-"), (.action.id // .items[0].id // "-"), (.action.status // .items[0].status // "-")] | @tsv' "$body_file" 2>/dev/null || echo "- - -")
  [ -n "${err:-}" ] || err=-
  if [ "$code" = 000 ] || [ "$code" -ge 500 ] 2>/dev/null; then
    [ -s "$body_file" ] && [ "$err" = - ] && err=non-json
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date +%s%3N)" "$step" "$pay" "$try" "$code" "$err" "${aid:--}" "${astatus:--}" "$sent" >>"$out/ops_attempts.tsv"
}
# A lost answer (to try again, after a pause): no answer, a 5xx, a throttle.
lost_answer() { [ "$code" = 000 ] || [ "$code" = 429 ] || [ "$code" -ge 500 ] 2>/dev/null; }

# login NAME PASSWORD JAR: until a 2xx (or RETRY_SECS).
login() {
  local t0=$SECONDS try=0
  rm -f "$3"
  while ((SECONDS - t0 < RETRY_SECS)); do
    try=$((try + 1))
    call login - "$try" "$3" POST /login "{\"username\":\"$1\",\"password\":\"$2\"}"
    case $code in 2??) return 0 ;; esac
    sleep 0.5
  done
  return 1
}

# The reversal of payment $1 from request to execution; prints the outcome.
reverse() {
  local pay=$1 t0=$SECONDS try=0 action=""
  while ((SECONDS - t0 < RETRY_SECS)); do
    try=$((try + 1))
    call request "$pay" "$try" "$jar_op" POST /actions \
      "{\"kind\":\"reverse\",\"payment_id\":\"$pay\",\"reason\":\"drill: reversed by ops during the failover drill\"}"
    case $code in
      201) action=$aid; break ;;
      401) login "$op_name" "$op_password" "$jar_op" ;;
      409)
        call find "$pay" "$try" "$jar_op" GET "/actions?status=pending&payment=$pay"
        # Our own request whose answer was lost; on a first try, the payment was not
        # reversible (a rule, not a fault).
        if [ "$try" -gt 1 ] && [ "$aid" != - ] && [ "$aid" != null ]; then action=$aid; break; fi
        echo refused; return ;;
      *) lost_answer || { echo refused; return; } ;;
    esac
    sleep 0.3
  done
  [ -n "$action" ] || { echo gave-up; return; }
  try=0
  while ((SECONDS - t0 < RETRY_SECS)); do
    try=$((try + 1))
    call approve "$pay" "$try" "$jar_ap" POST "/actions/$action/approve" \
      "{\"password\":\"$ap_password\",\"reason\":\"drill: approved\"}"
    case $code in
      200) [ "$astatus" = executed ] && { echo "$action executed"; return; } ;;
      401) login "$ap_name" "$ap_password" "$jar_ap"; continue ;;
      403 | 409) ;;  # refused, or approved but busy: read back below
      *) if lost_answer; then sleep 1; continue; fi
         echo "$action refused"; return ;;
    esac
    # What the request is now decides the next step.
    call show "$pay" "$try" "$jar_ap" GET "/actions/$action"
    case $astatus in
      executed) echo "$action executed"; return ;;
      stale) echo "$action stale"; return ;;
      approved | failed)
        call execute "$pay" "$try" "$jar_ap" POST "/actions/$action/execute" '{}'
        [ "$astatus" = executed ] && { echo "$action executed"; return; } ;;
      pending) [ "$try" -gt 1 ] || { echo "$action refused"; return; } ;;
      *) lost_answer || { echo "$action refused"; return; } ;;
    esac
    sleep 0.5
  done
  echo "$action gave-up"
}

login "$op_name" "$op_password" "$jar_op" || { echo "ops: the operator could not sign in" >&2; exit 1; }
login "$ap_name" "$ap_password" "$jar_ap" || { echo "ops: the approver could not sign in" >&2; exit 1; }
done_lines=0
while :; do
  stopping=0
  [ -e "$STOP" ] && stopping=1
  total=$(wc -l <"$out/to_reverse.tsv")
  if [ "$done_lines" -ge "$total" ]; then
    [ $stopping = 1 ] && break
    sleep 0.5
    continue
  fi
  done_lines=$((done_lines + 1))
  pay=$(sed -n "${done_lines}p" "$out/to_reverse.tsv" | cut -f2)
  read -r action outcome < <(reverse "$pay")
  [ -n "${outcome:-}" ] || { outcome=$action; action=-; }
  printf '%s\t%s\t%s\t%s\n' "$(date +%s%3N)" "$pay" "$action" "$outcome" >>"$out/reversal_acks.tsv"
done
