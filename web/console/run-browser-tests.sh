#!/usr/bin/env bash
# Runs the web console's browser tests against a real agentd: builds agentd into a temporary
# folder (or takes AGENTD_BIN), starts it with the demo agent (and a typed agent, triage, on
# the demo model) on free loopback ports, gRPC and
# --http-listen, with a --demo-delay that leaves the tests time to act mid-run and bearer-token
# auth on (a random token in --auth-tokens-file, given to the tests as AGENTD_TOKEN), runs
# web/console/test/ (node --test: Chromium driven by playwright-core) against its HTTP
# listener, then stops it with SIGTERM and checks that it exits 0.
#
#   bash web/console/run-browser-tests.sh      (or: npm run test:console)
#
# Needs Go, Node 20.19 or later, the repository's own `npm ci` done (playwright-core comes from
# there), and Chromium (Debian: apt-get install -y chromium; CHROMIUM names another binary).
# The console is embedded in agentd: after changing web/console/src, run `npm run
# build:console` first. Screenshots of each state the tests go through are saved in
# AGENTD_SCREENSHOTS (default: $TMPDIR/agentd-console-screenshots).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${AGENTD_BIN:-}
shots=${AGENTD_SCREENSHOTS:-${TMPDIR:-/tmp}/agentd-console-screenshots}
# A developer's AGENTD_* settings must not change the agentd this starts.
for v in $(compgen -e | grep '^AGENTD_' || true); do unset "$v"; done
chromium=${CHROMIUM:-/usr/bin/chromium}

. scripts/agentd-lib.sh
who=run-browser-tests
tmp=$(mktemp -d)
pid=
failed=()
cleanup() {
	agentd_kill
	rm -rf "$tmp"
}
trap cleanup EXIT

[[ -d node_modules/playwright-core ]] || {
	echo "run-browser-tests: run 'npm ci' at the repository root first: playwright-core comes from there" >&2
	exit 1
}
[[ -x $chromium ]] || {
	echo "run-browser-tests: no Chromium at $chromium: apt-get install -y chromium, or set CHROMIUM" >&2
	exit 1
}

agentd_build

echo "==> start agentd"
log=$tmp/agentd.log
# 50ms between deltas: the demo's longest answer streams for about three seconds, time enough
# to steer it or reload the page while it does.
token=token-$RANDOM$RANDOM$RANDOM$RANDOM
echo "$token" >"$tmp/tokens"
# The built-in demo agent, as agentd serves it without a file, and a typed one beside it.
cat >"$tmp/agents.yaml" <<'YAML'
default_agent: demo
agents:
  - name: demo
    description: "agentd's built-in demo agent: tells the time, calculates, and saves notes (saving asks for your approval)."
    model: demo
  - name: triage
    description: Answers with JSON.
    model: demo
    tools: [calculate]
    output_schema:
      type: object
      required: [summary, severity]
      properties:
        summary: {type: string}
        severity: {type: string, enum: [low, medium, high]}
YAML
agentd_start "agentd HTTP listening" http_addr --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --demo-delay 50ms \
	--drain-period 5s --shutdown-timeout 10s --auth-tokens-file "$tmp/tokens" --config "$tmp/agents.yaml"
echo "agentd serving HTTP on $addr; screenshots in $shots"

export AGENTD_HTTP_URL=http://$addr AGENTD_TOKEN=$token AGENTD_SCREENSHOTS=$shots CHROMIUM=$chromium

echo "==> node --test web/console/test/"
node --test --test-concurrency=1 web/console/test/ || failed+=(browser-tests)

agentd_stop

if ((${#failed[@]} > 0)); then
	echo "run-browser-tests: FAILED: ${failed[*]}; agentd's log:" >&2
	cat "$log" >&2
	exit 1
fi
echo "run-browser-tests: all browser tests passed"
