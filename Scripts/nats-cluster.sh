#!/usr/bin/env bash
# A 3-server NATS cluster with JetStream on loopback, for the tests, the bench and the docs (Docs/cluster.md).
#
#   Scripts/nats-cluster.sh up DIR       start n1, n2, n3 on free loopback ports, files in DIR; wait for the
#                                        JetStream meta leader; print the client URL list as the last line
#   Scripts/nats-cluster.sh down DIR     stop them (SIGTERM, then SIGKILL after 10 s)
#   Scripts/nats-cluster.sh kill DIR N   SIGKILL server N (1, 2 or 3), as a crash is
#   Scripts/nats-cluster.sh start DIR N  start server N again (same ports, same store) and wait until it is
#                                        back in the cluster
#
# DIR/nN/ holds server N's configuration (from Packaging/nats/nats-server.conf.in), its JetStream store and
# its log; DIR/nN.pid its process id; DIR/urls the client URL list. Never the system's server or its ports.
#
# GEOFENCE_PARTITIONS (default 12): the partitions the subject mapping spreads geofence.fix.VEHICLE over
# (geofence.fixp.N.VEHICLE, N from 0); `up` writes it into each server's configuration and DIR/partitions.
# NATS_CLUSTER_USER and NATS_CLUSTER_PASSWORD (default: neither): `up` makes the servers take clients with this
# user name and password only (an `authorization` block in each configuration); the routes between them stay
# open to loopback as before. The password may not hold ", \, $ or a line break.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
template="$here/../Packaging/nats/nats-server.conf.in"
server_bin=${NATS_SERVER:-/usr/sbin/nats-server}
host=127.0.0.1
partitions=${GEOFENCE_PARTITIONS:-12}

usage() {
    echo "usage: $0 up DIR | down DIR | kill DIR N | start DIR N" >&2
    exit 64
}

# Whether server N's process (by its pid file) is alive.
running() {
    local pidfile="$dir/n$1.pid"
    [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

# The JetStream meta leader as server N sees it (empty: none yet, or the server does not answer).
meta_leader() {
    python3 - "$(cat "$dir/n$1/monitor-port")" <<'PY' 2>/dev/null || true
import json, sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/jsz", timeout=1) as r:
    print(json.load(r).get("meta_cluster", {}).get("leader", ""))
PY
}

# Waits (up to 30 s) until every server in "$@" is running and sees the same meta leader.
wait_for_leader() {
    local deadline=$((SECONDS + 30)) n leader seen
    while ((SECONDS < deadline)); do
        seen=""
        for n in "$@"; do
            running "$n" || { echo "nats-cluster: server n$n exited; its log:" >&2; tail -n 20 "$dir/n$n/nats.log" >&2; return 1; }
            leader=$(meta_leader "$n")
            if [ -z "$leader" ] || { [ -n "$seen" ] && [ "$leader" != "$seen" ]; }; then seen="-"; break; fi
            seen=$leader
        done
        if [ -n "$seen" ] && [ "$seen" != "-" ]; then return 0; fi
        sleep 0.1
    done
    echo "nats-cluster: no JetStream meta leader within 30 s; logs in $dir/n*/nats.log" >&2
    return 1
}

start_server() {
    local n=$1
    if running "$n"; then echo "nats-cluster: n$n is already running" >&2; return 1; fi
    # setsid: the servers outlive this script and get no signal meant for its caller's terminal. They keep
    # no descriptor of the caller's beyond 0-2 (Foundation's Process, for one, waits until the script's
    # inherited socket is closed by every holder).
    (
        for fd in /proc/$BASHPID/fd/*; do
            fd=${fd##*/}
            if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
        done
        exec setsid "$server_bin" -c "$dir/n$n/nats.conf" >>"$dir/n$n/nats.log" 2>&1 </dev/null
    ) &
    echo $! >"$dir/n$n.pid"
}

# Sends SIGNAL to each server N given (all at once), waits up to 10 s for them to exit, then SIGKILLs what is left.
stop_servers() {
    local signal=$1 n pid deadline pids=()
    shift
    for n in "$@"; do
        [ -f "$dir/n$n.pid" ] || continue
        pid=$(cat "$dir/n$n.pid")
        kill "-$signal" "$pid" 2>/dev/null || true
        pids+=("$pid")
    done
    deadline=$((SECONDS + 10))
    for pid in "${pids[@]}"; do
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    done
    for n in "$@"; do rm -f "$dir/n$n.pid"; done
}

[ $# -ge 2 ] || usage
command=$1
dir=$2
case $command in
up)
    [ $# -eq 2 ] || usage
    [ -x "$server_bin" ] || { echo "nats-cluster: $server_bin is missing (make deps)" >&2; exit 69; }
    [ -f "$template" ] || { echo "nats-cluster: $template is missing" >&2; exit 66; }
    if ! [[ $partitions =~ ^[1-9][0-9]{0,3}$ ]] || ((partitions > 1024)); then
        echo "nats-cluster: GEOFENCE_PARTITIONS must be a whole number from 1 to 1024, not \"$partitions\"" >&2
        exit 64
    fi
    authorization=""
    if [ -n "${NATS_CLUSTER_USER:-}${NATS_CLUSTER_PASSWORD:-}" ]; then
        user=${NATS_CLUSTER_USER:-} password=${NATS_CLUSTER_PASSWORD:-}
        if [ -z "$user" ] || [ -z "$password" ] || [[ $user$password == *[\"\\\$]* ]] || [[ $user$password == *$'\n'* ]]; then
            echo "nats-cluster: give NATS_CLUSTER_USER and NATS_CLUSTER_PASSWORD together, without \", \\, \$ or a line break" >&2
            exit 64
        fi
        authorization=$(printf '\n# Clients log in with this user name and password (NATS_CLUSTER_USER, NATS_CLUSTER_PASSWORD).\nauthorization {\n    user: "%s"\n    password: "%s"\n}\n' "$user" "$password")
    fi
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    for n in 1 2 3; do
        if running "$n"; then echo "nats-cluster: a cluster is already running in $dir" >&2; exit 1; fi
    done
    # Nine free loopback ports (client, cluster, monitoring for each server), all held open at once so that
    # none is given twice. They are free when chosen, not when the servers bind them: another cluster started
    # at the same moment (tests run in parallel) may take one first. A server that finds its port taken
    # exits; then the three start again on other ports (three tries).
    for attempt in 1 2 3; do
        read -r -a ports < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(9)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
')
        routes=""
        for n in 1 2 3; do routes+="${routes:+, }nats-route://$host:${ports[$((3 * n - 2))]}"; done
        for n in 1 2 3; do
            mkdir -p "$dir/n$n/store"
            client=${ports[$((3 * n - 3))]} cluster=${ports[$((3 * n - 2))]} monitor=${ports[$((3 * n - 1))]}
            sed -e "s|@NAME@|n$n|; s|@HOST@|$host|g; s|@CLIENT_PORT@|$client|; s|@CLUSTER_PORT@|$cluster|" \
                -e "s|@MONITOR_PORT@|$monitor|; s|@STORE_DIR@|$dir/n$n/store|; s|@ROUTES@|$routes|" \
                -e "s|@PARTITIONS@|$partitions|g" \
                "$template" >"$dir/n$n/nats.conf"
            if [ -n "$authorization" ]; then
                printf '%s\n' "$authorization" >>"$dir/n$n/nats.conf"
                chmod 600 "$dir/n$n/nats.conf"
            fi
            echo "$client" >"$dir/n$n/client-port"
            echo "$monitor" >"$dir/n$n/monitor-port"
        done
        echo "$partitions" >"$dir/partitions"
        for n in 1 2 3; do start_server "$n"; done
        if wait_for_leader 1 2 3; then break; fi
        stop_servers KILL 1 2 3
        if ((attempt < 3)) && grep -qi "address already in use" "$dir"/n[123]/nats.log; then
            echo "nats-cluster: a port was taken meanwhile; starting again on other ports" >&2
            for n in 1 2 3; do mv "$dir/n$n/nats.log" "$dir/n$n/nats.log.try$attempt"; done
            continue
        fi
        exit 1
    done
    urls="nats://$host:$(cat "$dir/n1/client-port"),$host:$(cat "$dir/n2/client-port"),$host:$(cat "$dir/n3/client-port")"
    echo "$urls" >"$dir/urls"
    echo "$urls"
    ;;
down)
    [ $# -eq 2 ] || usage
    stop_servers TERM 1 2 3
    ;;
kill | start)
    [ $# -eq 3 ] || usage
    n=$3
    case $n in 1 | 2 | 3) ;; *) usage ;; esac
    [ -f "$dir/n$n/nats.conf" ] || { echo "nats-cluster: no cluster in $dir (up first)" >&2; exit 66; }
    if [ "$command" = kill ]; then
        stop_servers KILL "$n"
    else
        start_server "$n"
        others=()
        for m in 1 2 3; do running "$m" && others+=("$m"); done
        wait_for_leader "${others[@]}"
    fi
    ;;
*) usage ;;
esac
