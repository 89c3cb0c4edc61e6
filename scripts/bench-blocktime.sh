#!/usr/bin/env bash
# Block interval of the 4-validator localnet (with its sidecars) with CometBFT vote extensions
# on (every precommit carries BLS partials of the beacon and of the pending certificate, every
# proposal combines and every validator checks them) beside the same network with them off.
#
# Both runs use the binaries `scripts/localnet.sh` runs (BLS arithmetic is in blst, built
# optimized either way), a short timeout_commit so the per-block work shows, and the mean
# interval from block header times over heights FROM..FROM+BLOCKS (the first group key exists
# from about height 40).
#
#   scripts/bench-blocktime.sh            # TIMEOUT_COMMIT=200ms FROM=50 BLOCKS=40
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-cometbft.sh >/dev/null
cargo build -q -p gonka-cli -p gonka-sidecar
TIMEOUT_COMMIT=${TIMEOUT_COMMIT:-200ms}
FROM=${FROM:-50}
BLOCKS=${BLOCKS:-40}
PORT=${PORT:-27700}
RPC="http://127.0.0.1:$((PORT + 1))"

block_time() { # height -> unix seconds (fractional) of its header
  curl -s "$RPC/block?height=$1" | python3 -c '
import json, sys, datetime
t = json.load(sys.stdin)["result"]["block"]["header"]["time"]
whole, frac = t.rstrip("Z").split(".")
base = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.timezone.utc)
print(base.timestamp() + float("0." + frac))'
}

height() {
  curl -s "$RPC/status" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["sync_info"]["latest_block_height"])' 2>/dev/null || echo 0
}

run() { # label, extra gonkad localnet flags...
  local label=$1; shift
  local dir; dir=$(mktemp -d)
  target/debug/gonkad localnet --dir "$dir/net" --reset --base-port "$PORT" \
    --timeout-commit "$TIMEOUT_COMMIT" --no-import-keys "$@" >"$dir/localnet.log" 2>&1 &
  local pid=$!
  local last=$((FROM + BLOCKS + 1))
  while [ "$(height)" -lt "$last" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then echo "localnet exited; see $dir/localnet.log" >&2; exit 1; fi
    sleep 1
  done
  local t1 t2 beacon
  t1=$(block_time "$FROM"); t2=$(block_time $((FROM + BLOCKS)))
  beacon=$(target/debug/gonkad --node "$RPC" query bls beacon "$FROM" --output json 2>/dev/null \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["beacon"]["source"])' 2>/dev/null || echo none)
  kill -INT "$pid"; wait "$pid" || true
  python3 -c "print('| $label | $TIMEOUT_COMMIT | $FROM..$((FROM + BLOCKS)) | %.1f ms | $beacon |' % (($t2 - $t1) * 1000 / $BLOCKS))"
  rm -rf "$dir"
}

echo "| vote extensions | timeout_commit | heights | mean block interval | beacon source at $FROM |"
echo "|---|---|---|---|---|"
run off --no-vote-extensions
run on
