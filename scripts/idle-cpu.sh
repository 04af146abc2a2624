#!/usr/bin/env bash
# What xferd costs while it waits (issue 16, "idle"): CPU of one core, in
# percent, over a window, for
#   - the daemon with no job;
#   - a job whose server stalls (accepts, never answers);
#   - a paused job (the daemon's, over D-Bus);
#   - a job the server caps (nginx limit_rate 2 MB/s, one connection),
#     next to curl fetching the same URL;
# Goal: under 0.5% of one core each. Run as root after scripts/build.sh.
#   idle-cpu.sh [SECONDS]          window per case (default 30), after 5 s to settle
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
bin=$PWD/build/bin
work=$(mktemp -d /tmp/xfer-idle.XXXXXX)
port=$((20000 + RANDOM % 20000))
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  bash scripts/nginx-serve.sh stop "$work/nginx" >/dev/null 2>&1 || true
  [ -n "${bus_started:-}" ] && bash scripts/private-bus.sh stop "$work/bus" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# CPU ticks (user + system, every thread) of a process.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Percent of one core that PID used over the window.
measure() {
  local pid=$1 a b
  sleep 5
  a=$(ticks "$pid")
  sleep "$secs"
  b=$(ticks "$pid")
  awk -v d=$((b - a)) -v hz="$(getconf CLK_TCK)" -v s="$secs" 'BEGIN { printf "%.3f", 100 * d / hz / s }'
}
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$3"; }

mkdir -p "$work/data" "$work/dest" "$work/dest2"
head -c $((1 << 30)) /dev/zero >"$work/data/big.bin"
bash scripts/nginx-serve.sh start "$work/nginx" "$work/data" "$port" $((port + 1)) >/dev/null

# A server that accepts and never answers.
python3 -c "
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(64)
held = []
while True:
    c, _ = s.accept(); held.append(c)
" $((port + 2)) &
pids+=($!)

echo "| case | CPU, % of one core over ${secs} s | note |"
echo "|---|---|---|"

export DBUS_SYSTEM_BUS_ADDRESS
DBUS_SYSTEM_BUS_ADDRESS=$(bash scripts/private-bus.sh start "$work/bus")
bus_started=1
printf '[kernel]\nstate_file = "%s"\n' "$work/kernel-state" >"$work/xferd.conf"
"$bin/xferd" --config "$work/xferd.conf" --config-dir "$work/conf.d" --state-dir "$work/state" >"$work/xferd.log" 2>&1 &
xferd=$!
pids+=("$xferd")
for _ in $(seq 100); do "$bin/xferctl" policies >/dev/null 2>&1 && break; sleep 0.1; done
row "xferd, no job" "$(measure "$xferd")" "private bus, built-in defaults"

echo "http://127.0.0.1:$port/slow/big.bin $((1 << 30))" >"$work/slow.manifest"
chmod 755 "$work" "$work/dest"
out=$("$bin/xferctl" submit --manifest "$work/slow.manifest" --dest "$work/dest" --policy app-min-energy)
job=$(echo "$out" | grep -o '/org/xferd/Xferd1/job/[0-9]*' | head -1)
sleep 3
"$bin/xferctl" pause "${job##*/}" >/dev/null
row "xferd, one paused job" "$(measure "$xferd")" "paused after 3 s of a 2 MB/s download"
"$bin/xferctl" cancel "${job##*/}" >/dev/null || true

echo "http://127.0.0.1:$((port + 2))/stall.bin 1000000" >"$work/stall.manifest"
"$bin/xferctl" run --manifest "$work/stall.manifest" --dest "$work/dest2" --no-progress --kernel off \
  --kernel-state "$work/ks.json" --log-level error >/dev/null 2>&1 &
p=$!
pids+=("$p")
row "xferctl run, server stalls" "$(measure "$p")" "connection open, no byte"
kill -INT "$p" 2>/dev/null || true

rm -rf "$work/dest2"/*
"$bin/xferctl" run --manifest "$work/slow.manifest" --dest "$work/dest2" --no-progress --kernel off \
  --sla static --cc 1 --p 1 --pp 1 --kernel-state "$work/ks.json" --log-level error >/dev/null 2>&1 &
p=$!
pids+=("$p")
row "xferctl run, server caps at 2 MB/s" "$(measure "$p")" "one connection; receiving and writing the 2 MB/s"
kill -INT "$p" 2>/dev/null || true

curl -s -o "$work/curl.out" "http://127.0.0.1:$port/slow/big.bin" &
p=$!
pids+=("$p")
row "curl, server caps at 2 MB/s" "$(measure "$p")" "the same URL, for comparison"
kill "$p" 2>/dev/null || true
