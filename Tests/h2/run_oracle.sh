#!/usr/bin/env bash
# Runs the HTTP/2 suite against a reference server on loopback (h2c, prior
# knowledge), with that server's expected-failures file.
#
#   bash Tests/h2/run_oracle.sh          # nghttpd (Debian nghttp2-server)
#   bash Tests/h2/run_oracle.sh h2o      # h2o 2.2.5 (Debian h2o)
#
# Extra arguments after the server name go to pytest. Ends with pytest's
# own summary line and its exit status.
set -euo pipefail

server="${1:-nghttpd}"
[ $# -gt 0 ] && shift
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

need_apt() {
  if ! command -v "$1" >/dev/null 2>&1; then
    apt-get install -y "$2" >/dev/null 2>&1 || {
      apt-get update >/dev/null && apt-get install -y "$2" >/dev/null; }
  fi
}

case "$server" in
  nghttpd) need_apt nghttpd nghttp2-server ;;
  h2o) need_apt h2o h2o ;;
  *) echo "unknown server '$server' (nghttpd or h2o)" >&2; exit 2 ;;
esac

if ! python3 -c 'import h2, hyperframe, hpack, pytest' 2>/dev/null; then
  python3 -m pip install --quiet h2 hyperframe hpack pytest 2>/dev/null ||
    python3 -m pip install --quiet --break-system-packages \
      h2 hyperframe hpack pytest
fi

tmp="$(mktemp -d /tmp/h2suite.XXXXXX)"
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

mkdir -p "$tmp/htdocs"
printf '<!doctype html><title>oracle</title><p>the h2 suite oracle page</p>\n' \
  >"$tmp/htdocs/index.html"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"

case "$server" in
  nghttpd)
    # --echo-upload: a POST is answered with its own body
    nghttpd --no-tls --echo-upload -a 127.0.0.1 -d "$tmp/htdocs" "$port" \
      >"$tmp/server.log" 2>&1 &
    pid=$!
    ;;
  h2o)
    cat >"$tmp/h2o.conf" <<EOF
listen:
  host: 127.0.0.1
  port: $port
user: nobody
error-log: $tmp/error.log
hosts:
  default:
    paths:
      /:
        file.dir: $tmp/htdocs
EOF
    chmod 755 "$tmp" "$tmp/htdocs"
    h2o -c "$tmp/h2o.conf" >"$tmp/server.log" 2>&1 &
    pid=$!
    ;;
esac

up=""
for _ in $(seq 100); do
  if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), 0.2).close()" 2>/dev/null; then
    up=1; break
  fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$up" ]; then
  echo "$server did not start on 127.0.0.1:$port" >&2
  cat "$tmp/server.log" "$tmp/error.log" 2>/dev/null >&2 || true
  exit 1
fi

cd "$repo"
export H2_TARGET="127.0.0.1:$port"
export H2_PATH=/index.html
export H2_EXPECTED_FAILURES="$here/expected-failures-$server.txt"
# no reference server has a write deadline; 2 s keeps that (expected)
# failure short
export H2_WRITE_TIMEOUT="${H2_WRITE_TIMEOUT:-2}"
export PYTHONDONTWRITEBYTECODE=1
set +e
python3 -m pytest -q -p no:cacheprovider -p no:benchmark Tests/h2 "$@"
rc=$?
set -e
exit "$rc"
