#!/bin/sh
# MQTT benchmark, on the release build, against a private mosquitto on a free loopback port:
#
#   sink     events per second published by the MQTT sink (QoS 1, each acknowledged by PUBACK, with the
#            retained state topic of each enter/exit/determined: two messages for most events), from a
#            backlog in the outbox to the sink's cursor reaching the newest event;
#   hooks    the same with a global hook running `mosquitto_pub -q 1 -s` once per event (the way to
#            publish before the sink), at the default --hook-concurrency 4;
#   source   fixes per second taken from the broker by `--source mqtt://` (QoS 1, persistent session):
#            a backlog published while the engine was down, drained when it starts; and the same fixes
#            through `--source json:FIFO`, for comparison (the engine's own cost per fix).
#
# Times come from the store: sink_cursors (polled every 5 ms), deliveries.finished_at, and the
# source status the engine writes every 0.5 s with its time (settings.updated_at).
#
# Each phase also says the CPU seconds the engine, the broker and the bench's own client (the listener
# subscribed to the sink's topics) spent in it (utime + stime from /proc, so that a process waiting for a
# core on the shared machine does not count), per thousand messages: where each second goes.
#
# Usage: Scripts/bench-mqtt.sh [sink-events] [hook-events] [source-fixes]   (default 100000 2000 300000)
#        GEOFENCE_BIN=path/to/geofence Scripts/bench-mqtt.sh    (an existing binary; nothing is built)
#        BENCH_PHASES=sink,nostate,hooks,json,source (the default: all) to run some of them; add
#        sink-lib and source-lib for the same sink and source phases through libmosquitto
#        (GEOFENCE_MQTT_CLIENT=libmosquitto: the client geofence uses for TLS), in the same run;
#        source-commit and source-receipt for the source phase with --mqtt-ack commit and receipt,
#        alternated BENCH_ACK_RUNS times (1 by default), with their medians. BENCH_INFLIGHT sets the
#        broker's max_inflight_messages (its window towards the engine; 1000 by default, mosquitto's own 20)
set -eu
cd "$(dirname "$0")/.."
if [ -z "${GEOFENCE_BIN:-}" ]; then
    swift build -c release --product geofence >&2
    GEOFENCE_BIN=$(swift build -c release --show-bin-path)/geofence
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
python3 - "$GEOFENCE_BIN" "$WORK" "${1:-100000}" "${2:-2000}" "${3:-300000}" <<'PY'
import json, math, os, signal, socket, sqlite3, subprocess, sys, threading, time

BIN, WORK = sys.argv[1], sys.argv[2]
SINK_EVENTS, HOOK_EVENTS, SOURCE_FIXES = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
STEPS = 250          # 5 km east at 20 m/s, a fix a second
REGIONS = 50         # radius 20 m, every 100 m along the road
EVENTS_PER_VEHICLE = 110

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

PORT = free_port()
INFLIGHT = int(os.environ.get("BENCH_INFLIGHT", "1000"))
conf = os.path.join(WORK, "mosquitto.conf")
with open(conf, "w") as f:
    # max_inflight_messages: the broker's window towards the engine's subscription (20 by default).
    f.write(f"listener {PORT} 127.0.0.1\nallow_anonymous true\npersistence false\n"
            f"max_queued_messages 0\nmax_inflight_messages {INFLIGHT}\n" + ("user root\n" if os.getuid() == 0 else ""))
broker = subprocess.Popen(["mosquitto", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", PORT)).close()
        break
    except OSError:
        time.sleep(0.05)

def geofence(state, *args, stdin=None):
    return subprocess.run([BIN, *args, "--state-dir", state], input=stdin, capture_output=True, text=True,
                          check=True, env={**os.environ, "GEOFENCE_SOCKET": os.path.join(state + ".sock")})

def lon(x):
    return 2.35 + x / (111_320 * math.cos(math.radians(48.85)))

def setup(name):
    state = os.path.join(WORK, name)
    regions = [{"id": f"r{i}", "lat": 48.85, "lon": lon(100 * i), "radius": 20} for i in range(REGIONS)]
    path = os.path.join(WORK, name + ".json")
    with open(path, "w") as f:
        json.dump({"regions": regions}, f)
    geofence(state, "import", path)
    return state

def drive(vehicles, north=0.0):
    """TPV lines, step by step: each vehicle east along the road through the regions (with `north`, on a
    road that far north of them: no event)."""
    for step in range(STEPS):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(1_795_000_000 + step))
        for v in range(vehicles):
            x = -60 - 3 * (v % 20) + 20 * step
            yield json.dumps({"class": "TPV", "device": f"v{v}", "mode": 3, "time": stamp,
                              "lat": round(48.85 + north / 111_200, 8), "lon": round(lon(x), 8), "eph": 3,
                              "speed": 20.0, "track": 90.0})

def drain_rate(db, fixes, pids=(), threads_of=None):
    """Fixes per second from the source status the engine writes every 0.5 s, with its time: from the first
    sample that counts anything to the first that counts all; and the CPU seconds each of `pids` spent
    between the two samples (read when each sample is seen)."""
    samples, seen = [], None
    while True:
        row = db.execute("SELECT value, updated_at FROM settings WHERE key = 'source.status'").fetchone()
        if row and row[0] and row != seen:
            seen = row
            count = json.loads(row[0]).get("lines", 0)
            samples.append((row[1], count, [cpu(pid) for pid in pids], thread_cpu(threads_of) if threads_of else {}))
            if count >= fixes:
                break
        time.sleep(0.01)
    start = next(s for s in samples if s[1] > 0)
    end = samples[-1]
    spent = [b - a for a, b in zip(start[2], end[2])]
    threads = threads_note(start[3], end[3], end[1] - start[1]) if threads_of else ""
    return end[1] - start[1], end[0] - start[0], len(samples), spent, threads

def engine(state, source, log, client=None, ack=None):
    env = {**os.environ, "GEOFENCE_SOCKET": state + ".sock"}
    if client:
        env["GEOFENCE_MQTT_CLIENT"] = client
    if ack:
        env["GEOFENCE_MQTT_ACK"] = ack
    return subprocess.Popen([BIN, "run", "--source", source, "--state-dir", state], env=env,
                            stdout=open(log, "w"), stderr=subprocess.STDOUT)

def wait_log(log, text, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if text in open(log).read():
            return time.time()
        time.sleep(0.005)
    raise SystemExit(f"timed out waiting for {text!r} in {log}:\n" + open(log).read())

def stop(process):
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)

def fifo(name):
    path = os.path.join(WORK, name + ".fifo")
    os.mkfifo(path)
    return path

def backlog(name, events):
    """A state directory whose outbox holds about `events` events (a replayed drive)."""
    state = setup(name)
    vehicles = max(1, events // EVENTS_PER_VEHICLE)
    geofence(state, "replay", "-", stdin="\n".join(drive(vehicles)) + "\n")
    return state

results = []
PHASES = os.environ.get("BENCH_PHASES", "sink,nostate,hooks,json,source").split(",")
TICK = os.sysconf("SC_CLK_TCK")

def cpu(pid):
    """CPU seconds (user + system) process `pid` has used so far, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK

def thread_cpu(pid):
    """CPU seconds per thread name of process `pid` so far (threads of one name added up)."""
    spent = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                head, tail = f.read().rsplit(")", 1)
        except OSError:
            continue
        name = head.split("(", 1)[1]
        fields = tail.split()
        spent[name] = spent.get(name, 0) + (int(fields[11]) + int(fields[12])) / TICK
    return spent

def threads_note(before, after, messages):
    """The busiest threads between two `thread_cpu` readings, per message."""
    used = sorted(((after[n] - before.get(n, 0), n) for n in after), reverse=True)
    return "; engine threads " + ", ".join(f"{n} {s:.2f} s ({s / messages * 1e6:.1f} µs)" for s, n in used[:4] if s > 0)

def cpu_note(spent, messages):
    """`spent`: (name, CPU seconds) pairs; said per message, and in all."""
    return "; CPU " + ", ".join(f"{name} {seconds:.2f} s ({seconds / messages * 1e6:.1f} µs/message)"
                                for name, seconds in spent)

def progress(text):
    print(text, file=sys.stderr, flush=True)

# The sink: added first, so that its cursor is before the backlog. With the retained state topic (the
# default: two messages for most events), then without it. The listener counts what it receives.
def sink_phase(name, *options, client=None):
    state = os.path.join(WORK, name)
    os.makedirs(state)
    geofence(state, "sink", "add", "--id", "bench", "--mqtt", f"mqtt://127.0.0.1:{PORT}", *options)
    progress(f"{name}: replaying a drive into the outbox")
    state = backlog(name, SINK_EVENTS)
    progress(f"{name}: draining it")
    db = sqlite3.connect(os.path.join(state, "geofence.db"))
    total, newest = db.execute("SELECT count(*), max(seq) FROM events").fetchone()
    received = os.path.join(WORK, name + ".received")
    listener = subprocess.Popen(["mosquitto_sub", "-p", str(PORT), "-t", "geofence/+/+/+", "-F", "%t"],
                                stdout=open(received, "w"))
    time.sleep(0.2)
    path = fifo(name)
    log = os.path.join(WORK, name + ".log")
    run = engine(state, "json:" + path, log, client)
    writer = open(path, "w")  # held open, never written: the engine waits for fixes, the sink drains
    t0 = wait_log(log, "sink bench: connected")
    pids = (run.pid, broker.pid, listener.pid)
    cpu0 = [cpu(pid) for pid in pids]
    while db.execute("SELECT seq FROM sink_cursors WHERE sink = 'bench'").fetchone()[0] < newest:
        time.sleep(0.005)
    t1 = time.time()
    spent = [b - a for a, b in zip(cpu0, (cpu(pid) for pid in pids))]
    stop(run)
    writer.close()
    time.sleep(0.5)
    listener.terminate()
    listener.wait()
    topics = open(received).read().split()
    states = sum(1 for t in topics if t.endswith("/state"))
    messages = len(topics)
    rate = total / (t1 - t0)
    results.append(f"{name}: {total} events in {t1 - t0:.2f} s: {rate:,.0f} events/s; the listener received "
                   f"{messages - states} events and {states} states ({messages / (t1 - t0):,.0f} messages/s)"
                   + cpu_note(zip(("engine", "broker", "listener"), spent), messages))
    return rate

def hooks_phase():
    """One hook process per event."""
    state = os.path.join(WORK, "hooks")
    os.makedirs(state)
    geofence(state, "hook", "add", "--id", "pub", "--on", "all", "--command",
             f"mosquitto_pub -h 127.0.0.1 -p {PORT} -q 1 -t geofence/hook -s")
    progress("hooks: replaying a drive into the outbox")
    state = backlog("hooks", HOOK_EVENTS)
    progress("hooks: draining it")
    db = sqlite3.connect(os.path.join(state, "geofence.db"))
    total = db.execute("SELECT count(*) FROM events").fetchone()[0]
    path = fifo("hooks")
    log = os.path.join(WORK, "hooks.log")
    run = engine(state, "json:" + path, log)
    writer = open(path, "w")
    while db.execute("SELECT count(*) FROM deliveries WHERE status = 'done'").fetchone()[0] < total:
        time.sleep(0.02)
    first, last = db.execute("SELECT min(started_at), max(finished_at) FROM deliveries").fetchone()
    stop(run)
    writer.close()
    rate = total / (last - first)
    results.append(f"hooks: {total} events, one mosquitto_pub each, in {last - first:.2f} s: {rate:,.0f} events/s")
    return rate

rates = {}
if "sink" in PHASES:
    rates["sink"] = sink_phase("sink")
if "nostate" in PHASES:
    rates["nostate"] = sink_phase("sink, --state-topic none", "--state-topic", "none")
if "sink-lib" in PHASES:
    rates["sink-lib"] = sink_phase("sink through libmosquitto", client="libmosquitto")
if "hooks" in PHASES:
    rates["hooks"] = hooks_phase()

# The sources: the same fixes (a fleet driving 2 km from every region: no event, the fixes' own cost)
# through a JSON-lines FIFO, then through MQTT, a backlog published while the engine was down.
vehicles = max(1, SOURCE_FIXES // STEPS)
lines = list(drive(vehicles, north=2000)) if {"json", "source", "source-lib", "source-commit", "source-receipt"} & set(PHASES) else []
fixes = len(lines)

if "json" in PHASES:
    progress("source (JSON lines): feeding the fixes")
    state = setup("json")
    path = fifo("json")
    log = os.path.join(WORK, "json.log")
    run = engine(state, "json:" + path, log)
    db = sqlite3.connect(os.path.join(state, "geofence.db"))
    def feed():
        with open(path, "w") as f:
            for part in range(0, fixes, 5000):
                f.write("\n".join(lines[part:part + 5000]) + "\n")
            time.sleep(5)
    feeder = threading.Thread(target=feed)
    feeder.start()
    count, seconds, n, spent, threads = drain_rate(db, fixes, (run.pid,), run.pid)
    rates["json"] = count / seconds
    stop(run)
    feeder.join()
    results.append(f"source (JSON lines, for comparison): {count} fixes in {seconds:.2f} s: {rates['json']:,.0f} "
                   f"fixes/s ({n} status samples)" + cpu_note(zip(("engine",), spent), count) + threads)

def source_phase(name, client=None, ack=None):
    state = setup(name)
    source = f"mqtt://127.0.0.1:{PORT}/fleet/#"
    log = os.path.join(WORK, name + ".log")
    run = engine(state, source, log, client, ack)
    wait_log(log, "running:")
    stop(run)
    progress(f"{name}: publishing the backlog")
    # In parts: one mosquitto_pub -l given 100,000 lines at once was disconnected by the broker ("out of
    # memory") after about 35,000 of them.
    for part in range(0, fixes, 5000):
        subprocess.run(["mosquitto_pub", "-p", str(PORT), "-q", "1", "-t", "fleet/bench", "-l"],
                       input="\n".join(lines[part:part + 5000]) + "\n", text=True, check=True)
    db = sqlite3.connect(os.path.join(state, "geofence.db"))
    progress(f"{name}: draining it")
    run = engine(state, source, log, client, ack)
    count, seconds, n, spent, threads = drain_rate(db, fixes, (run.pid, broker.pid), run.pid)
    stop(run)
    results.append(f"{name} (MQTT, QoS 1): {count} fixes in {seconds:.2f} s: {count / seconds:,.0f} fixes/s "
                   f"({fixes} in all, {n} status samples)" + cpu_note(zip(("engine", "broker"), spent), count) + threads)
    return count / seconds

if "source" in PHASES:
    rates["source"] = source_phase("source")
# Both acknowledgement modes, alternated (--mqtt-ack; BENCH_ACK_RUNS pairs, 1 by default).
for run_number in range(int(os.environ.get("BENCH_ACK_RUNS", "1"))):
    for ack in ("commit", "receipt"):
        if "source-" + ack in PHASES:
            rate = source_phase(f"source --mqtt-ack {ack} #{run_number + 1}", ack=ack)
            rates.setdefault("source-" + ack, []).append(rate)
if "source-lib" in PHASES:
    rates["source-lib"] = source_phase("source through libmosquitto", client="libmosquitto")

broker.terminate()
print("\n".join(results))
if "sink" in rates and "hooks" in rates:
    print(f"sink / hooks: {rates['sink'] / rates['hooks']:,.0f} times as many events per second")
if "source" in rates and "json" in rates:
    print(f"MQTT source / JSON lines: {rates['source'] / rates['json']:.2f}")
for ack in ("commit", "receipt"):
    if "source-" + ack in rates:
        runs = sorted(rates["source-" + ack])
        print(f"source --mqtt-ack {ack}: median {runs[len(runs) // 2]:,.0f} fixes/s of "
              + "; ".join(f"{r:,.0f}" for r in rates["source-" + ack]) + f" (max_inflight_messages {INFLIGHT})")
if "source" in rates and "source-lib" in rates:
    print(f"MQTT source, own client / libmosquitto: {rates['source'] / rates['source-lib']:.2f}")
if "sink" in rates and "sink-lib" in rates:
    print(f"MQTT sink, own client / libmosquitto: {rates['sink'] / rates['sink-lib']:.2f}")
PY
