#!/usr/bin/env bash
# The demo: a private gpsd fed a recorded drive, `geofence run` watching three regions on it, hooks
# echoing to this terminal. Everything it starts, it stops; nothing outside a temp directory is touched.
set -euo pipefail
G=${1:?usage: demo.sh PATH/TO/geofence}
SIM="$(dirname "$G")/geofence-sim"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
GPSD=${GPSD:-/usr/sbin/gpsd}
WORK=$(mktemp -d /tmp/geofence-demo.XXXXXX)
export GEOFENCE_STATE_DIR="$WORK/state"
export GEOFENCE_SOCKET="$WORK/geofence.sock"
GPSD_PID=""
ENGINE_PID=""

TAIL_PID=""
cleanup() {
  [ -n "$TAIL_PID" ] && kill "$TAIL_PID" 2>/dev/null || true
  [ -n "$ENGINE_PID" ] && kill -TERM "$ENGINE_PID" 2>/dev/null && wait "$ENGINE_PID" 2>/dev/null || true
  [ -n "$GPSD_PID" ] && kill -TERM "$GPSD_PID" 2>/dev/null && wait "$GPSD_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

read -r PORT FEED < <("$SIM" free-ports 2)
say "Starting a private gpsd on port $PORT, reading NMEA from udp://127.0.0.1:$FEED"
"$GPSD" -N -n -b -S "$PORT" -F "$WORK/gpsd.sock" "udp://127.0.0.1:$FEED" >"$WORK/gpsd.log" 2>&1 &
GPSD_PID=$!
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.1
done

say "Three regions on the route (Demo/regions.json), with hooks that print here"
# The hooks append to a file in the demo's directory, which is shown as it grows.
sed "s|__HOOK_LOG__|$WORK/hooks.log|g" "$HERE/Demo/regions.json" > "$WORK/regions.json"
: > "$WORK/hooks.log"
tail -n0 -F "$WORK/hooks.log" 2>/dev/null &
TAIL_PID=$!
"$G" import "$WORK/regions.json"
"$G" list

say "geofence run (engine log lines start with a timestamp; hook output with 'hook |')"
"$G" run --gpsd "127.0.0.1:$PORT" --log-level notice &
ENGINE_PID=$!
sleep 1

say "Playing the recorded drive (Demo/drive.nmea, 32 s of driving) into gpsd in real time"
"$SIM" feed --port "$FEED" "$HERE/Demo/drive.nmea" &
FEEDER=$!
sleep 14
say "geofence status, while driving"
"$G" status --gpsd "127.0.0.1:$PORT" --wait 1s || true
wait "$FEEDER"
sleep 1.5

say "Stopping the engine (SIGTERM)"
kill -TERM "$ENGINE_PID"
wait "$ENGINE_PID" || true
ENGINE_PID=""

say "What the engine recorded and delivered (geofence events)"
"$G" events --limit 20 || true
say "Done. Everything the demo started is stopped."
