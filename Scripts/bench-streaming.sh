#!/bin/sh
# list, export and show through a running engine at N regions (default 1,000,000): wall time and the CLI's
# peak memory (/usr/bin/time), the engine's peak and resident memory before and after (/proc/PID/status).
# Docs/benchmarks.md, "Listing and exporting through the engine".
set -eu
N=${1:-1000000}
swift build -c release --product geofence >&2
B=$(swift build -c release --show-bin-path)/geofence
DIR=$(mktemp -d)
trap 'kill $(cat "$DIR/s/geofence.lock" 2>/dev/null) 2>/dev/null || true; rm -rf "$DIR"' EXIT
export GEOFENCE_STATE_DIR="$DIR/s" GEOFENCE_SOCKET="$DIR/c.sock"
python3 - "$N" "$DIR/regions.json" <<'PY'
import json, random, sys
n, path = int(sys.argv[1]), sys.argv[2]
random.seed(1)
with open(path, "w") as f:
    f.write('{"regions": [\n')
    for i in range(n):
        f.write(('' if i == 0 else ',\n') + json.dumps({"id": f"r{i}", "lat": round(random.uniform(-60, 60), 6),
                "lon": round(random.uniform(-170, 170), 6), "radius": 100, "name": f"region number {i}"}))
    f.write('\n]}\n')
PY
/usr/bin/time -f "import (no engine): %e s, CLI peak %M kB" "$B" import "$DIR/regions.json"
"$B" run --gpsd 127.0.0.1:9 > "$DIR/run.log" 2>&1 &
until grep -q "control socket at" "$DIR/run.log"; do sleep 0.5; done
sleep 3
PID=$(cat "$DIR/s/geofence.lock")
mem() { echo "engine $1: $(grep -h -e VmHWM -e VmRSS /proc/$PID/status | tr -s ' \t' ' ' | tr '\n' ' ')"; }
mem "after start"
/usr/bin/time -f "list --json: %e s, CLI peak %M kB" "$B" list --json > "$DIR/out"; echo "  $(stat -c %s "$DIR/out") bytes"
mem "after list --json"
/usr/bin/time -f "export: %e s, CLI peak %M kB" "$B" export > "$DIR/out"; echo "  $(stat -c %s "$DIR/out") bytes"
mem "after export"
/usr/bin/time -f "list (table): %e s, CLI peak %M kB" "$B" list > "$DIR/out"; echo "  $(wc -l < "$DIR/out") lines"
/usr/bin/time -f "show: %e s, CLI peak %M kB" "$B" show r$((N - 1)) > /dev/null
mem "after all"
