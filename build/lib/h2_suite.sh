#!/usr/bin/env bash
# The in-repo HTTP/2 suite (Tests/h2: RFC 9113 and 7541 cases and the floods) against band-edge:
# h2c with prior knowledge on a loopback port (--h2c), a 2 s write deadline for the reader that
# never opens its window, /_test/echo for bodies, the shell's index.html (a few KB) where flow
# control needs a body longer than /healthz's. Known deviations of libnghttp2 are listed in
# Tests/h2/expected-failures-band-edge.txt (strict xfail: a fix shows). Ends with pytest's line.
set -euo pipefail
cd "$(dirname "$0")/../.."
source build/lib/common.sh
work=$(mktemp -d /tmp/band-edge-h2.XXXXXX)
trap 'kill "$pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(free_port)
python3 build/lib/bench_fixture.py Public "$work/public"
"$release_binary" shell build --from "$work/public" --to "$work/shell" > /dev/null
"$release_binary" serve --listen "127.0.0.1:$port" --shell "$work/shell" --data "$work/data" --h2c --test-routes \
  --write-timeout 2 --no-access-log > /dev/null 2> "$work/error.log" &
pid=$!
wait_for_http "http://127.0.0.1:$port/healthz"
H2_TARGET=127.0.0.1:$port H2_EARLY_ANSWERS=1 H2_PATH=/healthz H2_POST_PATH=/_test/echo H2_LARGE_PATH=/index.html H2_WRITE_TIMEOUT=2 \
  H2_EXPECTED_FAILURES=Tests/h2/expected-failures-band-edge.txt \
  python3 -m pytest -q -p no:cacheprovider Tests/h2 "$@"
