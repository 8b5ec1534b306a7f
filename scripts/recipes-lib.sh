# The checks the recipe scripts share (grpcurl-recipes.sh, curl-recipes.sh); sourced, not run.
# The ERR trap names the recipe that failed and the line of the command.

step=0
trap 'echo "FAIL (recipe $step): the command at line $LINENO of $0 exited with status $? (its error is above)" >&2' ERR

# header prints the line that opens a recipe.
header() {
	step=$((step + 1))
	printf '\n=== %d. %s\n' "$step" "$*"
}

# fail reports a failed check, with the output it was about, and ends the script.
fail() {
	echo "FAIL (recipe $step): $1" >&2
	if [[ -n ${2:-} && -f $2 ]]; then
		echo "--- $2:" >&2
		cat "$2" >&2
	fi
	exit 1
}

# expect_line <what> <file> <line>: file holds line exactly.
expect_line() {
	grep -qxF -- "$3" "$2" || fail "$1: no line \"$3\"" "$2"
	echo "ok: $1"
}

# expect <what> <file> <jq filter>: the filter is true of the JSON in file.
expect() {
	jq -e "$3" "$2" >/dev/null || fail "$1: jq -e '$3' is not true" "$2"
	echo "ok: $1"
}

# expect_events <what> <file> <jq filter>: the filter is true of the array of a stream's
# messages in file (one JSON object each, as grpcurl and unframe print them).
expect_events() {
	jq -e -s "$3" "$2" >/dev/null || fail "$1: jq -e -s '$3' is not true" "$2"
	echo "ok: $1"
}

# approval_waiting: opens a Run stream (grpcurl's) that starts a run to save a note, and
# then neither answers nor half-closes, and waits until the run asks its approval. The
# stream's messages go to first.json, its pid is $first, and fd 3 holds its input open:
# `exec 3>&-; wait "$first"` ends it. It sets run_id and approval_id.
approval_waiting() {
	mkfifo first.in
	grpcurl -plaintext -d @ "$ADDR" agentd.v1.AgentService/Run <first.in >first.json &
	first=$!
	exec 3>first.in
	echo '{"clientSeq":1,"start":{"input":"save a note: buy milk"}}' >&3
	for _ in $(seq 100); do
		jq -e -s 'any(.[]; .event | has("approvalRequested"))' first.json >/dev/null 2>&1 && break
		sleep 0.1
	done
	run_id=$(jq -rs '.[0].event.runStarted.runId' first.json)
	approval_id=$(jq -rs 'map(.event.approvalRequested.approvalId // empty)[0]' first.json)
	[[ $approval_id == appr_* ]] || fail "the run asked no approval" first.json
}
