#!/usr/bin/env bash
# A/B of fix evaluation at 1M regions between an earlier commit and this tree, on one machine, runs
# alternating (so that load from other processes falls on both alike): prints every run and the medians.
#
#   Scripts/bench-ab.sh BEFORE-COMMIT [RUNS]      e.g. Scripts/bench-ab.sh ebaa0a6 7
#
# Each run is `geofence-bench --monitor-child 1000000 [driving]`: a fresh process that builds the monitor
# and prints the median ns per fix of RegionMonitor.process (Docs/benchmarks.md). The random-jump fixes of
# commits before 2026-12-01 came a second apart per vehicle; they are patched to a day apart, as this
# tree's are (a jump across the country a second later is an outlier now, dropped unevaluated).
# BENCH_CONFIRMATIONS=1 is passed to the old build's second random-jump run (commits that still had
# MonitorConfiguration.confirmations read it, see below): the old rule deciding at the first conclusive fix,
# as the new one does, so that both make the same events.
set -euo pipefail
BEFORE=${1:?usage: bench-ab.sh BEFORE-COMMIT [RUNS]}
RUNS=${2:-5}
HERE="$(cd "$(dirname "$0")/.." && pwd)"
WORK=$(mktemp -d /tmp/geofence-ab.XXXXXX)
trap 'git -C "$HERE" worktree remove --force "$WORK/before" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

git -C "$HERE" worktree add --detach "$WORK/before" "$BEFORE" >/dev/null
BENCH_SRC="$WORK/before/Sources/GeofenceBench/FixEvaluationBench.swift"
sed -i 's|let time = start.addingTimeInterval(Double(i / subjects))$|let time = start.addingTimeInterval(Double(i / subjects) * 86_400)|' "$BENCH_SRC"
# The old rule's confirmations, from the environment (only where the option exists).
if grep -q "public var confirmations" "$WORK/before/Sources/GeofenceCore/Monitor/RegionMonitor.swift"; then
  perl -0pi -e 's|func indexedMonitor\(_ regions: \[Region\]\) -> RegionMonitor \{\n    var monitor = RegionMonitor\(\)|func indexedMonitor(_ regions: [Region]) -> RegionMonitor {\n    var configuration = MonitorConfiguration()\n    if let n = ProcessInfo.processInfo.environment["BENCH_CONFIRMATIONS"].flatMap(Int.init) { configuration.confirmations = n }\n    var monitor = RegionMonitor(configuration: configuration)|' "$BENCH_SRC"
fi
echo "building $BEFORE and this tree (release)..." >&2
(cd "$WORK/before" && swift build -c release --product geofence-bench >/dev/null)
(cd "$HERE" && swift build -c release --product geofence-bench >/dev/null)

run() { (cd "$1" && env $3 .build/release/geofence-bench --monitor-child 1000000 $2 2>/dev/null | tail -1); }
declare -A all
for i in $(seq "$RUNS"); do
  for mode in driving random; do
    arg=$([ "$mode" = driving ] && echo driving || true)
    b=$(run "$WORK/before" "$arg" "")
    a=$(run "$HERE" "$arg" "")
    all[$mode-before]+="$b "
    all[$mode-after]+="$a "
    line="$mode run $i: before $b, after $a"
    if [ "$mode" = random ]; then
      c=$(run "$WORK/before" "" "BENCH_CONFIRMATIONS=1")
      all[$mode-before1]+="$c "
      line="$line, before with confirmations 1: $c"
    fi
    echo "$line"
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
for key in driving-before driving-after random-before random-before1 random-after; do
  printf '%-16s median %.0f ns/fix\n' "$key" "$(echo "${all[$key]}" | median)"
done
