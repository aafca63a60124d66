#!/usr/bin/env bash
# Demo request from the shell: read the cache; on a miss, run this same script
# with --locked under `rlock exec`, which re-checks the cache and rebuilds it if
# still missing. Prints one JSON record. Run by demo/run.py, which sets the
# environment (REDIS_URL, RLOCK, DEMO_*).
set -euo pipefail

store() { redis-cli -u "$REDIS_URL" --no-auth-warning "$@"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

if [ "${1:-}" = "--locked" ]; then
  wait_ms=$(($(now_ms) - DEMO_ASKED_MS))
  outcome=waited
  if [ -z "$(store GET "$DEMO_CACHE_KEY")" ]; then
    # The slow database, counted in Redis.
    store INCR "$DEMO_REBUILDS_KEY" >/dev/null
    sleep "$DEMO_DB_DELAY"
    value=$(printf '{"id":1001,"name":"Mechanical keyboard","price":129,"rebuilt_by":"cli","fence":%s}' \
      "$RLOCK_FENCING_TOKEN")
    # Jittered TTL: entries filled together must not all expire together.
    store SET "$DEMO_CACHE_KEY" "$value" EX $((300 + RANDOM % 61)) >/dev/null
    outcome=rebuilt
  fi
  printf '{"runtime":"cli","outcome":"%s","wait_ms":%s,"fence":%s}\n' \
    "$outcome" "$wait_ms" "$RLOCK_FENCING_TOKEN"
  exit 0
fi

if [ -n "$(store GET "$DEMO_CACHE_KEY")" ]; then
  echo '{"runtime":"cli","outcome":"hit","wait_ms":null,"fence":null}'
  exit 0
fi
DEMO_ASKED_MS=$(now_ms) exec "$RLOCK" exec --ttl 10 --timeout 30 "$DEMO_LOCK" -- "$0" --locked
