#!/usr/bin/env bash
# Runs the example clients' tests against a real agentd: builds agentd into a temporary folder
# (or takes AGENTD_BIN), starts it on a free loopback port with the demo agent and
# --demo-delay 0, runs examples/typescript (node --test) and examples/python (unittest)
# against it, with bearer-token auth on (a random token in --auth-tokens-file, given to the
# clients as AGENTD_TOKEN), then stops it with SIGTERM and checks that it exits 0.
#
#   bash examples/run-tests.sh
#
# Needs Go, Node 20.19 or later with npm, the repository's own `npm ci` done (gen/ts imports
# @bufbuild/protobuf from the root node_modules), and Debian's python3-grpcio and
# python3-protobuf (PYTHON names another interpreter that has grpcio and protobuf).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
PYTHON=${PYTHON:-/usr/bin/python3}
bin=${AGENTD_BIN:-}
# A developer's AGENTD_* settings must not change the agentd this starts.
for v in $(compgen -e | grep '^AGENTD_' || true); do unset "$v"; done
# Keep __pycache__ out of gen/python and the examples.
export PYTHONDONTWRITEBYTECODE=1

. scripts/agentd-lib.sh
who=run-tests
tmp=$(mktemp -d)
pid=
failed=()
cleanup() {
	agentd_kill
	rm -rf "$tmp"
}
trap cleanup EXIT

[[ -d node_modules/@bufbuild/protobuf ]] || {
	echo "run-tests: run 'npm ci' at the repository root first: gen/ts imports @bufbuild/protobuf from there" >&2
	exit 1
}
"$PYTHON" -c 'import grpc, google.protobuf' 2>/dev/null || {
	echo "run-tests: $PYTHON cannot import grpc and google.protobuf: apt-get install -y python3-grpcio python3-protobuf" >&2
	exit 1
}

agentd_build
echo "==> npm ci (examples/typescript)"
(cd examples/typescript && npm ci --no-audit --no-fund --loglevel=error)

echo "==> start agentd"
log=$tmp/agentd.log
AGENTD_TOKEN=token-$RANDOM$RANDOM$RANDOM$RANDOM
echo "$AGENTD_TOKEN" >"$tmp/tokens"
agentd_start "agentd listening" addr --listen 127.0.0.1:0 --demo-delay 0 --drain-period 5s --shutdown-timeout 10s \
	--auth-tokens-file "$tmp/tokens"
echo "agentd serving on $addr"
export AGENTD_ADDR=$addr AGENTD_TOKEN

echo "==> examples/typescript: node --test client.test.mjs"
(cd examples/typescript && node --test client.test.mjs) || failed+=(typescript)
echo "==> examples/python: $PYTHON -m unittest -v test_client"
(cd examples/python && "$PYTHON" -m unittest -v test_client) || failed+=(python)

agentd_stop

if ((${#failed[@]} > 0)); then
	echo "run-tests: FAILED: ${failed[*]}; agentd's log:" >&2
	cat "$log" >&2
	exit 1
fi
echo "run-tests: all example tests passed"
