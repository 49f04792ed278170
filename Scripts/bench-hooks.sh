#!/bin/sh
# Hook runner benchmark, with a trivial hook (`true`), on the release build:
#
#   latency     event committed -> hook process started (p50, p99): `geofence replay --hooks -` fed a live
#               stream of fixes, as the daemon is fed by gpsd, so hooks run while events are being stored;
#   throughput  sustained deliveries per second: a backlog of events in the outbox, drained by
#               `geofence replay --hooks` at --hook-concurrency 1, 4 (the default) and 8.
#
# Times come from the store itself: events.created_at (stamped before the event's transaction commits, so the commit counts) and
# deliveries.started_at (the hook's posix_spawn), both full-precision seconds.
#
# Usage: Scripts/bench-hooks.sh [events]      (default 2000 events per measurement)
#        GEOFENCE_BIN=path/to/geofence Scripts/bench-hooks.sh    (an existing binary; nothing is built)
set -eu
cd "$(dirname "$0")/.."
EVENTS=${1:-2000}
if [ -z "${GEOFENCE_BIN:-}" ]; then
    swift build -c release --product geofence >&2
    GEOFENCE_BIN=$(swift build -c release --show-bin-path)/geofence
fi
BIN=$GEOFENCE_BIN
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
python3 - "$BIN" "$WORK" "$EVENTS" <<'PY'
import json, math, os, sqlite3, subprocess, sys, time

BIN, WORK, EVENTS = sys.argv[1], sys.argv[2], int(sys.argv[3])
VEHICLES = 8
STEPS = 41  # one pass: 400 m north of a centre to 400 m south (or back), 20 m a step: one enter, one exit

def geofence(state, *args, stdin=None):
    return subprocess.run([BIN, *args, "--state-dir", state], input=stdin, capture_output=True, text=True, check=True)

def centre(k):
    return 48.2, 16.37 + k * 5000 / (111320 * math.cos(math.radians(48.2)))

def setup(name):
    state = os.path.join(WORK, name)
    for k in range(VEHICLES):
        lat, lon = centre(k)
        geofence(state, "add", "--id", f"r{k}", "--lat", str(lat), "--lon", str(lon), "--radius", "100")
    geofence(state, "hook", "add", "--id", "trivial", "--on", "all", "--command", "true")
    return state

def fix_lines(step):
    """The TPV lines of one time step: vehicle k shuttles through region k, its phase shifted by k steps so
    that the vehicles do not cross their boundaries at the same moment."""
    out = []
    t = 1_795_000_000 + step
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t))
    for k in range(VEHICLES):
        s = step + 5 * k
        pos = s % (2 * (STEPS - 1))
        north = 400 - 20 * pos if pos < STEPS else -400 + 20 * (pos - (STEPS - 1))
        lat, lon = centre(k)
        lat += north / 111_200
        out.append(json.dumps({"class": "TPV", "device": f"/dev/vehicle{k}", "mode": 3, "time": stamp,
                               "lat": round(lat, 8), "lon": round(lon, 8), "eph": 4.5, "speed": 20.0}))
    return out

def steps_for(events):
    # Each vehicle crosses a boundary twice per pass (40 steps).
    return int(events / VEHICLES / 2 * (STEPS - 1)) + 2 * STEPS

def rows(state, sql):
    db = sqlite3.connect(os.path.join(state, "geofence.db"))
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()

def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(math.ceil(p / 100 * len(values))) - 1)]

# --- latency: a live stream, hooks fired as events are stored -------------------------------------------
state = setup("latency")
replay = subprocess.Popen([BIN, "replay", "--hooks", "-", "--state-dir", state], stdin=subprocess.PIPE,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
interval = 0.01  # 8 fixes every 10 ms: about 40 events a second
for step in range(steps_for(EVENTS)):
    replay.stdin.write("\n".join(fix_lines(step)) + "\n")
    replay.stdin.flush()
    time.sleep(interval)
replay.stdin.close()
replay.wait()
latencies = [r[0] * 1000 for r in rows(state, """
    SELECT d.started_at - e.created_at FROM deliveries d JOIN events e ON e.seq = d.event_seq
    WHERE d.status = 'done' AND d.attempts = 1""")]
total = rows(state, "SELECT count(*) FROM events")[0][0]

# --- throughput: a backlog drained ------------------------------------------------------------------------
track = os.path.join(WORK, "track.json")
with open(track, "w") as f:
    for step in range(steps_for(EVENTS)):
        f.write("\n".join(fix_lines(step)) + "\n")
throughput = {}
for concurrency in (1, 4, 8):
    state = setup(f"backlog-{concurrency}")
    geofence(state, "replay", track)  # events stored in the outbox; no hook runs yet
    started = time.monotonic()
    geofence(state, "replay", "--hooks", "--hook-concurrency", str(concurrency), os.devnull)
    wall = time.monotonic() - started
    (n, first, last), = rows(state, "SELECT count(*), min(started_at), max(finished_at) FROM deliveries WHERE status = 'done'")
    throughput[concurrency] = (n, n / (last - first), wall)

load = open("/proc/loadavg").read().split()[:3]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"machine: {os.cpu_count()} CPUs, {cpu}; load average {' '.join(load)}")
print(f"latency (event committed -> hook started), {len(latencies)} deliveries of {total} events, ~40 events/s:")
print(f"  p50 {percentile(latencies, 50):.2f} ms, p90 {percentile(latencies, 90):.2f} ms, "
      f"p99 {percentile(latencies, 99):.2f} ms, max {max(latencies):.2f} ms")
print("throughput (backlog drained, hook `true`):")
for concurrency, (n, rate, wall) in throughput.items():
    print(f"  --hook-concurrency {concurrency}: {n} deliveries, {rate:.0f}/s ({wall:.1f} s including process start)")
PY
