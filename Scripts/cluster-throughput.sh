#!/bin/bash
# Throughput of 1, 2 and 3 cluster engines on this machine: a fleet's fixes published first (as fast as
# acknowledged), then N engines started; the time until they have judged every fix. Release binaries.
# Usage: Scripts/cluster-throughput.sh DIR VEHICLES MINUTES
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ -n "${1:-}" ] || { echo "usage: $0 DIR [...]" >&2; exit 64; }
D=$1; V=${2:-10000}; MIN=${3:-3}; B=$ROOT/.build/release
for N in 1 2 3; do
  rm -rf $D/n$N; mkdir -p $D/n$N/nats
  U=$($ROOT/Scripts/nats-cluster.sh up $D/n$N/nats | tail -1)
  $B/geofence-bench cluster-fleet --urls $U --dir $D/n$N/fleet --vehicles $V --minutes $MIN --fast > $D/n$N/pub.log 2>&1
  TOTAL=$(grep -o "^fixes [0-9]*" $D/n$N/pub.log | awk '{print $2}')
  $B/geofence import --nats $U $D/n$N/fleet/regions.json > /dev/null
  T0=$(date +%s.%N)
  for i in $(seq 1 $N); do $B/geofence run --source $U --partitions 12 --engine-id e$i > $D/n$N/e$i.log 2>&1 & done
  while true; do
    sleep 1
    DONE=$($B/geofence status --nats $U --json 2>/dev/null | python3 -c '
import json,sys
r=json.load(sys.stdin); print(int(sum(e["fixes"] for e in r["engines"])))' 2>/dev/null || echo 0)
    [ "${DONE:-0}" -ge "$TOTAL" ] && break
    [ $(echo "$(date +%s.%N) - $T0 > 600" | bc) = 1 ] && { echo "timeout at $DONE of $TOTAL"; break; }
  done
  T1=$(date +%s.%N)
  echo "engines $N: $TOTAL fixes in $(echo "$T1 - $T0" | bc) s (including start and take-over): $(echo "$TOTAL / ($T1 - $T0)" | bc) fixes/s"
  grep -h "CPU\|taken" $D/n$N/e1.log | head -2
  pkill -TERM -f "geofence run --source $U"; sleep 3
  $ROOT/Scripts/nats-cluster.sh down $D/n$N/nats > /dev/null 2>&1
done
