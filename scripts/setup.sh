#!/usr/bin/env bash
# Installs everything xferd needs to build, test and benchmark, from Debian's
# packages. Idempotent: when every package is already installed it only says so.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake pkg-config git clang llvm bpftool
  # libraries of the design
  libcurl4-openssl-dev libnghttp2-dev libbpf-dev libelf-dev zlib1g-dev
  libcpupower-dev libpowercap-dev libeigen3-dev libalglib-dev libsystemd-dev
  libspdlog-dev libfmt-dev nlohmann-json3-dev libtomlplusplus-dev libcli11-dev
  libsqlite3-dev libssl-dev libpq-dev liburing-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev nginx curl wget aria2 iperf3 dbus iproute2 procps
  # the fleet history's tests: a real PostgreSQL server, started from the fixture
  postgresql
  # the credential tests: a forward proxy that asks for a user and password
  tinyproxy
  # the observability tests: promtool and a Prometheus server that scrapes
  # xferd; tmux to read `xferctl top`'s screen; xferctl top draws with ncurses
  prometheus tmux libncurses-dev
  # the daemon's tests: systemd-analyze / systemd-tmpfiles, gdbus and dbus-send
  # (D-Bus clients this project did not write), setpriv
  systemd libglib2.0-bin dbus-bin util-linux
  # the reserved-blocks test: an ext4 image (mkfs.ext4) on a loop device
  e2fsprogs
  # fault injection (xfer/faults.h): libfiu's library and fiu-run
  libfiu-dev fiu-utils
  # the layering check (scripts/include-graph.py) and the scripts beside it
  python3
)

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root (it installs packages with apt-get)" >&2
  exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# systemd is not PID 1 on build machines: keep package scripts from starting
# services (nginx would grab port 80). Removed again on exit.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  created_policy=1
fi
trap '[ $created_policy -eq 1 ] && rm -f "$policy"' EXIT

apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
