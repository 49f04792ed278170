#!/usr/bin/env bash
# Memory per vehicle: N vehicles, two fixes each, through the JSON fleet source of a release engine with no
# regions; prints the engine's peak resident memory (VmHWM) and what it cost per vehicle.
#
#   Scripts/bench-vehicles.sh [N] [geofence run options...]
#   Scripts/bench-vehicles.sh 900000                     # every vehicle active (heard from within a day)
#   Scripts/bench-vehicles.sh 900000 --idle-after 10s    # vehicles quiet for 10 s leave memory
#
# The fixes are stamped with the present (a live engine refuses old ones). Everything lives in a temp
# directory, removed at the end; the engine stops by itself when the stream ends.
set -euo pipefail
N=${1:-900000}
shift || true
HERE="$(cd "$(dirname "$0")/.." && pwd)"
G="$HERE/.build/release/geofence"
WORK=$(mktemp -d /tmp/geofence-vehicles.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
(cd "$HERE" && swift build -c release --product geofence >/dev/null)

now=$(date -u +%s)
for round in 0 1; do
  t=$(date -u -d "@$((now + round))" +%Y-%m-%dT%H:%M:%S.000Z)
  awk -v n="$N" -v t="$t" -v r="$round" 'BEGIN {
    for (v = 0; v < n; v++)
      printf "{\"class\":\"TPV\",\"device\":\"veh-%06d\",\"mode\":3,\"time\":\"%s\",\"lat\":%.6f,\"lon\":%.6f,\"eph\":5}\n",
        v, t, 45 + (v % 1000) * 0.001, 4 + int(v / 1000) * 0.001 + r * 0.0001
  }'
done > "$WORK/fleet.json"

baseline=$(GEOFENCE_STATE_DIR="$WORK/empty" GEOFENCE_SOCKET="$WORK/empty.sock" \
  "$G" run --source json:/dev/null --log-level error 2>/dev/null & pid=$!; peak=0
  while kill -0 "$pid" 2>/dev/null; do
    r=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || true); [ -n "$r" ] && peak=$r; sleep 0.2
  done; echo "$peak")

start=$(date +%s.%N)
GEOFENCE_STATE_DIR="$WORK/state" GEOFENCE_SOCKET="$WORK/sock" \
  "$G" run --source "json:$WORK/fleet.json" --log-level notice "$@" >"$WORK/log" 2>&1 &
pid=$!
peak=0
while kill -0 "$pid" 2>/dev/null; do
  r=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
  [ -n "$r" ] && peak=$r
  sleep 0.5
done
end=$(date +%s.%N)
tail -1 "$WORK/log"
echo "vehicles: $N, 2 fixes each, options: ${*:-none}"
echo "peak resident memory: $((peak / 1024)) MiB (an engine with no vehicles: $((baseline / 1024)) MiB)"
echo "per vehicle: $(( (peak - baseline) * 1024 / N )) B; wall time $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}') s"
