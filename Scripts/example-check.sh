#!/usr/bin/env bash
# `make test`'s check of the library example: Examples/print-events, built against this package, fed the
# demo's drive as gpsd JSON lines, must print the same events as `geofence replay` on the same fixes (the
# ids aside: each run makes its own).
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$HERE/.build/debug"
WORK=$(mktemp -d /tmp/geofence-example.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

swift build --package-path "$HERE/Examples/print-events" --scratch-path "$HERE/.build/examples" -q
"$BIN/geofence-sim" demo-drive --json > "$WORK/drive.jsonl"

"$HERE/.build/examples/debug/print-events" "$WORK/drive.jsonl" > "$WORK/embedded.jsonl"

export GEOFENCE_STATE_DIR="$WORK/state" GEOFENCE_SOCKET="$WORK/none.sock"
"$BIN/geofence" add --id customer-42 --name "Customer 42, loading bay" --lat 51.5007 --lon -0.12027 --radius 50 \
  --notify enter,exit > /dev/null
"$BIN/geofence" replay "$WORK/drive.jsonl" > "$WORK/replayed.jsonl"

strip() { sed -E 's/"id":"[^"]*",?//' "$1"; }
if ! diff <(strip "$WORK/replayed.jsonl") <(strip "$WORK/embedded.jsonl"); then
  echo "example-check: the embedded monitor and geofence replay disagree (above: replay <, embedded >)" >&2
  exit 1
fi
n=$(wc -l < "$WORK/embedded.jsonl")
[ "$n" -ge 2 ] || { echo "example-check: only $n events: the drive should enter and leave the bay" >&2; exit 1; }
echo "example-check: Examples/print-events printed the $n events geofence replay prints"
