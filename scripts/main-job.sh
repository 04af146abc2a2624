#!/usr/bin/env bash
# xferd's main job on built-in defaults, from a fresh Debian 12 machine, as
# root: installs what is missing, builds, generates a sample dataset shaped
# like the papers' (html, image and video files), serves it from a private
# nginx on loopback, starts the xferd daemon (on the system bus when there is
# one, else on a private dbus-daemon with the shipped bus policy), and submits
# the job through `xferctl submit --wait`: progress while it runs, the result
# table at the end. Extra arguments go to `xferctl submit` (e.g. --json,
# --policy max-throughput; `xferctl policies` lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== build"
bash scripts/build.sh release

demo=$PWD/build/demo
mkdir -p "$demo"
port_h1=${XFER_DEMO_PORT:-18080}
port_h2=$((port_h1 + 1))
if [ ! -f "$demo/sample.manifest" ]; then
  echo "== sample dataset (mixed, 1% of the papers' counts: 50 html, 5 images, 1 video)"
  build/bin/xfer-datagen --shape mixed --scale 0.01 --seed 1 --out "$demo/data" \
    --base-url "http://127.0.0.1:$port_h1/" --manifest "$demo/sample.manifest.tmp"
  mv "$demo/sample.manifest.tmp" "$demo/sample.manifest"
fi

xferd_pid=""
private_bus=0
cleanup() {
  # xferd first: on SIGTERM it checkpoints and restores cores / frequency.
  if [ -n "$xferd_pid" ]; then kill "$xferd_pid" 2>/dev/null && wait "$xferd_pid" 2>/dev/null || true; fi
  if [ "$private_bus" = 1 ]; then bash scripts/private-bus.sh stop "$demo/bus"; fi
  bash scripts/nginx-serve.sh stop "$demo/nginx" 2>/dev/null || true
}
trap cleanup EXIT
bash scripts/nginx-serve.sh stop "$demo/nginx" 2>/dev/null || true
bash scripts/nginx-serve.sh start "$demo/nginx" "$demo/data" "$port_h1" "$port_h2"

# The bus: the system bus when it runs, else a private one configured like it.
if [ -z "${DBUS_SYSTEM_BUS_ADDRESS:-}" ] && [ ! -S /run/dbus/system_bus_socket ]; then
  DBUS_SYSTEM_BUS_ADDRESS=$(bash scripts/private-bus.sh start "$demo/bus")
  export DBUS_SYSTEM_BUS_ADDRESS
  private_bus=1
  echo "== no system bus here: a private one at $DBUS_SYSTEM_BUS_ADDRESS"
fi

# xferd on built-in defaults; only its job store and kernel journal live in the demo directory.
printf '[kernel]\nstate_file = "%s"\n' "$demo/kernel-state" >"$demo/xferd.conf"
echo "== xferd (log: $demo/xferd.log)"
build/bin/xferd --config "$demo/xferd.conf" --config-dir "$demo/xferd.conf.d" --state-dir "$demo/state" \
  >"$demo/xferd.log" 2>&1 &
xferd_pid=$!
for _ in $(seq 100); do
  build/bin/xferctl policies >/dev/null 2>&1 && break
  kill -0 "$xferd_pid" 2>/dev/null || { cat "$demo/xferd.log"; exit 1; }
  sleep 0.1
done

rm -rf "$demo/dest"
mkdir -p "$demo/dest"
echo "== xferctl submit: $(grep -vc '^#' "$demo/sample.manifest") files from nginx on 127.0.0.1:$port_h1 into $demo/dest"
rc=0
build/bin/xferctl submit --manifest "$demo/sample.manifest" --dest "$demo/dest" --wait "$@" || rc=$?
echo "== xferd's tuning decisions (from its log)"
grep -E 'job [0-9]+: [0-9.]+ Mbit/s|kernel' "$demo/xferd.log" | sed 's/^\[[^]]*\] \[[^]]*\] \[[^]]*\] /  /' | tail -n 12 || true
exit "$rc"
