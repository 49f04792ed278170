#!/usr/bin/env python3
"""Take-over times of a full-size cluster run (Scripts/cluster-acceptance.sh): for every SIGKILL in DIR/events.log,
the partitions the killed engine held then (from its log's "taken" and "given up" lines) and how long after the
kill an engine (another, or the killed one's new process) logged taking each. With --status, the largest lag (fixes waiting) each partition showed in
the status snapshots DIR/status-*.json. Usage: Scripts/cluster-takeovers.py DIR [--ttl SECONDS]"""
import glob, json, re, statistics, sys
from datetime import datetime, timezone

def parse_time(text):
    return datetime.strptime(text.rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()

def ownership(path):
    """(time, partition, taken) of every take and give-up in an engine's log, in order; (time, None, False) where
    a new process of the engine joined."""
    changes = []
    for line in open(path, errors="replace"):
        m = re.match(r"(\S+) \w+ partition (\d+): (taken|given up)", line)
        if m:
            changes.append((parse_time(m.group(1)), int(m.group(2)), m.group(3) == "taken"))
        # The log goes on across restarts: a process that has just joined owns nothing (partition None).
        m = re.match(r"(\S+) \w+ engine \S+ joined the cluster", line)
        if m:
            changes.append((parse_time(m.group(1)), None, False))
    return changes

def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    ttl = float(sys.argv[sys.argv.index("--ttl") + 1]) if "--ttl" in sys.argv else 6.0
    logs = {int(re.search(r"e(\d+)\.log$", p).group(1)): ownership(p) for p in glob.glob(f"{d}/e[0-9]*.log")}
    day = None
    kills = []
    for line in open(f"{d}/events.log"):
        m = re.match(r"(\d\d:\d\d:\d\d\.\d+) SIGKILL e(\d+)", line)
        if m:
            # events.log has times of day (UTC): the day is the first log line's.
            if day is None:
                first = min(c[0] for changes in logs.values() for c in changes)
                day = datetime.fromtimestamp(first, timezone.utc).strftime("%Y-%m-%d")
            kills.append((parse_time(f"{day}T{m.group(1)}"), int(m.group(2))))
    delays = []
    for at, victim in kills:
        held = set()
        for t, p, taken in logs.get(victim, []):
            if t > at:
                break
            if p is None:
                held.clear()
            else:
                (held.add if taken else held.discard)(p)
        row = []
        for p in sorted(held):
            # Any engine's take after the kill, the victim's own new process included (started again 3 s later,
            # it may claim a partition back first).
            takes = [t for changes in logs.values() for t, q, taken in changes if q == p and taken and t > at]
            if takes:
                row.append((p, min(takes) - at))
        delays += [s for _, s in row]
        text = ", ".join(f"p{p} {s:.2f} s" for p, s in row) or "none held"
        print(f"SIGKILL e{victim} at {datetime.fromtimestamp(at, timezone.utc):%H:%M:%S}: {len(held)} partitions; taken over: {text}")
    if delays:
        bound = ttl + ttl / 3 + 2
        print(f"take-overs: {len(delays)}, median {statistics.median(delays):.2f} s, max {max(delays):.2f} s "
              f"(stated bound ttl + ttl/3 + 2 = {bound:.1f} s): {'within' if max(delays) <= bound else 'EXCEEDED'}")
    lag = {}
    for path in sorted(glob.glob(f"{d}/status-*.json")):
        try:
            report = json.load(open(path))
        except (OSError, ValueError):
            continue
        for engine in report.get("engines", []):
            for p in engine.get("partitions", []):
                lag[p["partition"]] = max(lag.get(p["partition"], 0), p.get("lag", 0))
    if lag:
        print("largest lag seen per partition (fixes waiting): " + ", ".join(f"p{int(p)} {int(v)}" for p, v in sorted(lag.items())))

main()
