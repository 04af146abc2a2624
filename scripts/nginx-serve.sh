#!/usr/bin/env bash
# A private nginx for tests, benchmarks and the README's main job.
#   nginx-serve.sh start RUNDIR DATADIR H1_PORT H2C_PORT [RATE] [ADDR]
#   nginx-serve.sh stop RUNDIR
# H1_PORT serves HTTP/1.1, H2C_PORT HTTP/2 over cleartext (prior knowledge).
# Paths: /NAME the data; /slow/NAME the same, rate-limited per connection to
# RATE (default 2m); /error500/NAME always 500; /reset/NAME closes the
# connection without a reply (nginx's 444); /redir-file/NAME redirects to
# file:///etc/passwd; /redir/NAME redirects to /NAME.
# More servers (https tests: their certificates, ports and ALPN) may be put in
# RUNDIR/sites.d/*.conf before start; each includes RUNDIR/locations.conf,
# which includes RUNDIR/locations.d/*.conf (a test's own locations).
# Access log: RUNDIR/access.log, one request a line:
#   msec request_time connection connection_requests protocol status body_bytes "request" "range" port
set -euo pipefail

cmd=${1:?usage: nginx-serve.sh start|stop RUNDIR ...}
run=$(realpath -m "${2:?RUNDIR missing}")

if [ "$cmd" = stop ]; then
  if [ -f "$run/nginx.pid" ]; then
    pid=$(cat "$run/nginx.pid")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$run/nginx.pid"
  fi
  exit 0
fi

[ "$cmd" = start ] || { echo "nginx-serve.sh: unknown command $cmd" >&2; exit 2; }
data=$(realpath "${3:?DATADIR missing}")
h1=${4:?H1_PORT missing}
h2=${5:?H2C_PORT missing}
rate=${6:-2m}
addr=${7:-127.0.0.1}
mkdir -p "$run/tmp" "$run/sites.d" "$run/locations.d"

cat >"$run/locations.conf" <<CONF
root $data;
location /slow/ { alias $data/; limit_rate $rate; }
location /error500/ { return 500; }
location /reset/ { return 444; }
location /redir-file/ { return 302 file:///etc/passwd; }
location /redir/ { rewrite ^/redir/(.*)\$ http://$addr:\$server_port/\$1 redirect; }
include $run/locations.d/*.conf;
CONF

# Workers run as root: this is a private server for tests, benchmarks and the
# demo, bound to loopback or a test namespace, and the data may sit below a
# directory nobody else can traverse (a checkout in /root).
cat >"$run/nginx.conf" <<CONF
user root;
worker_processes 2;
pid $run/nginx.pid;
error_log $run/error.log warn;
events { worker_connections 8192; }
http {
  log_format xfer '\$msec \$request_time \$connection \$connection_requests \$server_protocol \$status \$body_bytes_sent "\$request" "\$http_range" \$server_port';
  access_log $run/access.log xfer;
  client_body_temp_path $run/tmp/body;
  proxy_temp_path $run/tmp/proxy;
  fastcgi_temp_path $run/tmp/fastcgi;
  uwsgi_temp_path $run/tmp/uwsgi;
  scgi_temp_path $run/tmp/scgi;
  default_type application/octet-stream;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  keepalive_timeout 120s;
  http2_max_concurrent_streams 128;
  server { listen $addr:$h1; include $run/locations.conf; }
  server { listen $addr:$h2 http2; include $run/locations.conf; }
  include $run/sites.d/*.conf;
}
CONF

nginx -t -q -c "$run/nginx.conf" -p "$run" 2>"$run/nginx-t.log" || { cat "$run/nginx-t.log" >&2; exit 1; }
nginx -c "$run/nginx.conf" -p "$run"
for _ in $(seq 100); do
  if (exec 3<>"/dev/tcp/$addr/$h1") 2>/dev/null && (exec 3<>"/dev/tcp/$addr/$h2") 2>/dev/null; then
    exit 0
  fi
  sleep 0.05
done
echo "nginx-serve.sh: nginx did not listen on $addr:$h1 and :$h2; see $run/error.log" >&2
exit 1
