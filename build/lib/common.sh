# Shared by the build/ scripts: package installation, building, ports, waiting.
# shellcheck shell=bash

export PATH="/opt/swift/usr/bin:$PATH"
release_binary=.build/release/band-edge
debug_binary=.build/debug/band-edge

log() { printf '==> %s\n' "$*" >&2; }

# SwiftPM leaves an empty TemporaryDirectory.* in $TMPDIR at every run: each run gets a scratch
# directory of its own, removed when it ends (pass or fail).
swift() {
  local scratch status=0
  scratch=$(mktemp -d /tmp/band-edge-swift.XXXXXX)
  TMPDIR=$scratch command swift "$@" || status=$?
  rm -rf "$scratch"
  return "$status"
}

# Installs Debian packages that are missing (apt-get update once, only when needed).
ensure_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  log "installing ${missing[*]}"
  local sudo=""
  ((EUID == 0)) || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The C libraries the package links (module maps in Sources/C*).
# ensure_pypi PACKAGE[=MODULE] ...: pip-installs the PyPI packages whose module cannot be imported
# (MODULE defaults to PACKAGE).
ensure_pypi() {
  local missing=() item
  for item in "$@"; do
    python3 -c "import ${item#*=}" 2>/dev/null || missing+=("${item%%=*}")
  done
  ((${#missing[@]})) || return 0
  log "pip install ${missing[*]}"
  python3 -m pip install --quiet "${missing[@]}" 2>/dev/null \
    || python3 -m pip install --quiet --break-system-packages "${missing[@]}"
}

ensure_build_packages() {
  ensure_packages libssl-dev zlib1g-dev libbrotli-dev libsqlite3-dev libargon2-dev libpq-dev libcurl4-openssl-dev libnghttp2-dev pkg-config
  command -v swift >/dev/null || { echo "band-edge: error: the Swift 6 toolchain is not on PATH (expected /opt/swift)" >&2; exit 1; }
}

# Release builds link the Swift runtime statically: it loads only the pages it uses, which keeps
# the server's resident memory several MiB smaller than with the shared runtime.
# A failed build stops the caller: the binary left from an earlier build is never served or tested.
build_release() {
  ensure_build_packages
  log "swift build -c release --static-swift-stdlib"
  local status=0
  swift build -c release --static-swift-stdlib -j "$(nproc)" 2>&1 | { grep -Ev '^\[[0-9]+/[0-9]+\]' >&2 || true; }
  status=${PIPESTATUS[0]}
  if ((status != 0)) || [[ ! -x $release_binary ]]; then
    echo "band-edge: error: the release build failed (swift build exited $status)" >&2
    exit 1
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

wait_for_http() {
  for _ in $(seq 1 200); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "band-edge: error: nothing answered at $1" >&2
  return 1
}

# A throwaway PostgreSQL 15 for the tests, in DIR (an empty directory, e.g. from mktemp -d): a
# cluster in DIR/data with trust authentication for the role band_edge, listening only on a Unix
# socket in DIR (no TCP), with SETTINGS (default "-c fsync=off"; the bench keeps fsync on), and a
# database band_edge_test. Exports
# BAND_EDGE_TEST_POSTGRES, the libpq URI the tests connect with. PostgreSQL refuses to run as
# root, so as root the server runs as the Debian package's postgres user, which then owns DIR.
postgres_bin=/usr/lib/postgresql/15/bin
start_test_postgres() {
  local dir=$1 settings=${2:--c fsync=off}
  local as=()
  if ((EUID == 0)); then
    chown postgres: "$dir"
    as=(runuser -u postgres --)
  fi
  "${as[@]}" "$postgres_bin/initdb" -D "$dir/data" -U band_edge --auth=trust -E UTF8 --locale=C \
    --no-sync >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    echo "band-edge: error: initdb failed in $dir" >&2
    return 1
  }
  "${as[@]}" "$postgres_bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" \
    -o "-k $dir -c listen_addresses='' $settings" -w start >/dev/null || {
    cat "$dir/server.log" >&2
    echo "band-edge: error: PostgreSQL did not start in $dir" >&2
    return 1
  }
  "${as[@]}" "$postgres_bin/createdb" -h "$dir" -U band_edge band_edge_test || return 1
  export BAND_EDGE_TEST_POSTGRES="postgresql:///band_edge_test?host=$dir&user=band_edge"
  log "PostgreSQL 15 for the tests: $BAND_EDGE_TEST_POSTGRES"
}

# Stops the server start_test_postgres started in DIR (if it is running) and removes DIR.
stop_test_postgres() {
  local dir=$1
  [[ -n $dir && -d $dir ]] || return 0
  if [[ -f $dir/data/postmaster.pid ]]; then
    local as=()
    ((EUID == 0)) && as=(runuser -u postgres --)
    "${as[@]}" "$postgres_bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null ||
      echo "band-edge: warning: PostgreSQL in $dir did not stop" >&2
  fi
  rm -rf "$dir"
}
