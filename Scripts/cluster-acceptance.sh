#!/bin/bash
# Full-size acceptance run of issue 26 (debug binaries, or GEOFENCE_BUILD=.build/release): 10,000 vehicles, 3 engines, P=12, kills every 30 s,
# one NATS server killed and restarted. Usage: Scripts/cluster-acceptance.sh DIR MINUTES
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ -n "${1:-}" ] || { echo "usage: $0 DIR [...]" >&2; exit 64; }
D=$1; MIN=${2:-4}; B=${GEOFENCE_BUILD:-$ROOT/.build/debug}
rm -rf $D; mkdir -p $D/nats
U=$($ROOT/Scripts/nats-cluster.sh up $D/nats | tail -1); echo "$U" > $D/urls
$B/geofence-bench cluster-fleet --urls $U --dir $D/fleet --vehicles 10000 --minutes $MIN --no-publish 2>&1 | tail -1
$B/geofence import --nats $U $D/fleet/regions.json
start_engine() { $B/geofence run --source $U --partitions 12 --engine-id e$1 --lease-ttl 6 --checkpoint-interval 5 >> $D/e$1.log 2>&1 & echo $! > $D/e$1.pid; }
for i in 1 2 3; do start_engine $i; done
sleep 10
echo "publish start $(date +%T)"
$B/geofence-bench cluster-fleet --urls $U --dir $D/fleet --vehicles 10000 --minutes $MIN > $D/pub.log 2>&1 &
PUB=$!
# Status snapshots every 5 s, for the lag each partition shows (Scripts/cluster-takeovers.py reads them).
( k=0; while kill -0 $PUB 2>/dev/null; do $B/geofence status --nats $U --json > $D/status-$k.json 2>/dev/null; k=$((k+1)); sleep 5; done ) &
T0=$(date +%s); n=0; natskilled=0
while kill -0 $PUB 2>/dev/null; do
  sleep 30
  kill -0 $PUB 2>/dev/null || break
  i=$(( n % 3 + 1 )); n=$((n+1))
  kill -9 $(cat $D/e$i.pid); echo "$(date +%T.%N | cut -c1-12) SIGKILL e$i" | tee -a $D/events.log
  sleep 3; start_engine $i; echo "$(date +%T.%N | cut -c1-12) restart e$i" | tee -a $D/events.log
  if [ $natskilled = 0 ] && [ $(( $(date +%s) - T0 )) -gt 100 ]; then
    $ROOT/Scripts/nats-cluster.sh kill $D/nats 2; echo "$(date +%T.%N | cut -c1-12) kill nats n2" | tee -a $D/events.log
    sleep 8; $ROOT/Scripts/nats-cluster.sh start $D/nats 2 >/dev/null; echo "$(date +%T.%N | cut -c1-12) restart nats n2" | tee -a $D/events.log
    natskilled=1
  fi
done
echo "publish done $(date +%T)"; tail -2 $D/pub.log
sleep 30
$B/geofence status --nats $U > $D/status.txt 2>&1
$B/geofence-bench cluster-compare --urls $U --dir $D/fleet > $D/compare.log 2>&1; tail -5 $D/compare.log
python3 $ROOT/Scripts/cluster-takeovers.py $D --ttl 6
for i in 1 2 3; do kill -TERM $(cat $D/e$i.pid) 2>/dev/null; done; sleep 5
$ROOT/Scripts/nats-cluster.sh down $D/nats > /dev/null 2>&1
echo finished
