# Starting and stopping a real agentd for the scripts that test clients against one
# (examples/run-tests.sh, web/console/run-browser-tests.sh); sourced, not run. The caller
# sets bin (the agentd binary, or empty for agentd_build to build one in $tmp), log (its log file)
# and who (its own name, for messages), and has a failed array.

# agentd_build builds agentd into $tmp unless bin already names a binary.
agentd_build() {
	if [[ -z $bin ]]; then
		echo "==> go build ./cmd/agentd"
		bin=$tmp/agentd
		go build -o "$bin" ./cmd/agentd
	fi
}

# agentd_start MSG FIELD ARGS...: starts $bin with ARGS, its stderr (JSON logs) in $log,
# and waits for the log line MSG to give FIELD, the address it listens on: $addr. $pid is
# agentd's. It ends the script, with agentd's log, if agentd does not start.
agentd_start() {
	local msg=$1 field=$2
	shift 2
	"$bin" "$@" 2>"$log" &
	pid=$!
	addr=
	for _ in $(seq 300); do
		addr=$(sed -n "s/.*\"msg\":\"$msg\".*\"$field\":\"\([^\"]*\)\".*/\1/p" "$log" | head -n1)
		[[ -n $addr ]] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if [[ -z $addr ]]; then
		echo "$who: agentd did not start; its log:" >&2
		cat "$log" >&2
		exit 1
	fi
}

# agentd_stop stops agentd with SIGTERM, as a platform would, and adds agentd-shutdown to
# failed unless it exits 0.
agentd_stop() {
	echo "==> stop agentd (SIGTERM)"
	kill -TERM "$pid"
	local status=0
	wait "$pid" || status=$?
	pid=
	if ((status != 0)); then
		echo "$who: agentd exited $status after SIGTERM" >&2
		failed+=(agentd-shutdown)
	fi
}

# agentd_kill kills an agentd still running (the scripts' EXIT trap).
agentd_kill() {
	if [[ -n ${pid:-} ]] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
}
