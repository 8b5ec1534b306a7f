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
