#!/usr/bin/env bash
# Demo requests from the shell: `rlock cached` prints the product, from the
# cache or, on a miss, from this script's `load` (the slow database), which
# one caller across every process and language runs while the others wait for
# the value it stores. Run by demo/run.py, which sets the environment
# (REDIS_URL, RLOCK, DEMO_*):
#
#   request.sh once ACT ID      one request
#   request.sh steady ACT NAME  a request every DEMO_INTERVAL s until a line
#                               (or the end) on stdin
#   request.sh load             the database: what `rlock cached` runs
#
# Each request prints one JSON record.
set -euo pipefail

store() { redis-cli -u "$REDIS_URL" --no-auth-warning "$@"; }
# Microseconds (EPOCHREALTIME without its decimal point) as milliseconds.
ms() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

# The query the cache protects. Every call is counted in Redis, and logged
# with its time and the request that ran it (DEMO_REQUEST, passed on by
# rlock to the command it runs).
load() {
  local started=${EPOCHREALTIME/[!0-9]/} call
  call=$(store INCR "$DEMO_CALLS_KEY")
  sleep "$DEMO_DB_DELAY"
  store RPUSH "$DEMO_LOG_KEY" "$(printf '{"call":%s,"by":"%s","started_ms":%s,"ended_ms":%s}' \
    "$call" "$DEMO_REQUEST" "$(ms "$started")" "$(ms "${EPOCHREALTIME/[!0-9]/}")")" >/dev/null
  printf '{"id":1001,"name":"Mechanical keyboard","price":129,"version":%s,"loaded_by":"%s"}' \
    "$call" "$DEMO_REQUEST"
}

request() {  # ACT ID
  local started=${EPOCHREALTIME/[!0-9]/}
  # --early 0: no early refresh, so that in act 2 the entry does expire.
  DEMO_REQUEST=$2 "$RLOCK" cached --ttl "$DEMO_TTL" --stale "$DEMO_STALE" --early 0 \
    "$DEMO_KEY" -- "$0" load |
    {
      # The value is in hand when rlock closes its stdout. The call picked to
      # refresh a stale entry closes it first and runs `load` after: that
      # call's process takes the database's time, its request does not.
      product=$(cat)
      ended=${EPOCHREALTIME/[!0-9]/}
      [ -n "$product" ] || exit 0  # rlock failed: its status ends the script
      printf '{"runtime":"cli","act":%s,"request":"%s","started_ms":%s,"latency_ms":%s,"product":%s}\n' \
        "$1" "$2" "$(ms "$started")" "$(ms $((ended - started)))" "$product"
    }
}

steady() {  # ACT NAME
  local n=0
  while :; do
    n=$((n + 1))
    request "$1" "$2.$n"
    # A line or the end of stdin stops the loop; a timeout (status > 128) paces it.
    read -r -t "$DEMO_INTERVAL" _ && break
    [ $? -gt 128 ] || break
  done
}

case "${1:-}" in
  once) request "$2" "$3" ;;
  steady) steady "$2" "$3" ;;
  load) load ;;
  *) echo "usage: $0 once ACT ID | steady ACT NAME | load" >&2; exit 64 ;;
esac
