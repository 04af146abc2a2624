#!/usr/bin/env bash
# xferd's main job on built-in defaults, from a fresh Debian 12 machine, as
# root: installs what is missing, builds, generates a sample dataset shaped
# like the papers' (html, image and video files), serves it from a private
# nginx on loopback, and fetches it with `xferctl run` under the default SLA
# policy, showing progress and the result table. Extra arguments go to
# `xferctl run` (e.g. --json, --cc 8, --sla static).
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

bash scripts/nginx-serve.sh stop "$demo/nginx" 2>/dev/null || true
bash scripts/nginx-serve.sh start "$demo/nginx" "$demo/data" "$port_h1" "$port_h2"
trap 'bash scripts/nginx-serve.sh stop "$demo/nginx"' EXIT

rm -rf "$demo/dest"
mkdir -p "$demo/dest"
echo "== xferctl run: $(grep -vc '^#' "$demo/sample.manifest") files from nginx on 127.0.0.1:$port_h1 into $demo/dest"
build/bin/xferctl run --manifest "$demo/sample.manifest" --dest "$demo/dest" "$@"
