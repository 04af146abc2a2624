#!/usr/bin/env bash
# A private D-Bus "system" bus, for machines without one (and for the tests):
# a dbus-daemon whose policy is like Debian's system bus (deny by default)
# plus xferd's own shipped policy, systemd/org.xferd.Xferd1.conf.
#   private-bus.sh start DIR   starts it; prints its address (unix:path=DIR/socket)
#   private-bus.sh stop DIR    stops it
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: private-bus.sh start|stop DIR" >&2
  exit 2
fi
case "$cmd" in
  start)
    mkdir -p "$dir"
    cat >"$dir/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$dir/socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
  </policy>
  <!-- As Debian's: root may become a bus monitor (busctl monitor). -->
  <policy user="root">
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Monitoring"/>
  </policy>
  <include>$src/systemd/org.xferd.Xferd1.conf</include>
</busconfig>
CONF
    rm -f "$dir/socket"
    dbus-daemon --config-file="$dir/bus.conf" --fork --print-pid >"$dir/pid"
    echo "unix:path=$dir/socket"
    ;;
  stop)
    [ -f "$dir/pid" ] && kill "$(cat "$dir/pid")" 2>/dev/null || true
    rm -f "$dir/pid" "$dir/socket"
    ;;
  *)
    echo "private-bus.sh: start or stop, not '$cmd'" >&2
    exit 2
    ;;
esac
