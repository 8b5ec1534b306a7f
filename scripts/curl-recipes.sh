#!/usr/bin/env bash
# Runs the curl recipes of docs/http.md against a running
# agentd's HTTP listener and checks what they print, so that the docs and the service
# cannot drift apart. CI runs it through TestEndToEndCurlRecipes (cmd/agentd/e2e_test.go),
# which builds and starts agentd with --http-listen on loopback ports first.
#
#   go run ./cmd/agentd --demo-delay 0 --http-listen localhost:8080 &
#   bash scripts/curl-recipes.sh     # or AGENTD_HTTP=http://host:port AGENTD_ADDR=host:port bash …
#
# Needs curl, jq, od and head (coreutils), and grpcurl for the one recipe whose run a
# Run stream starts (a bidi stream, which curl cannot hold open both ways).
set -euo pipefail

HTTP=${AGENTD_HTTP:-http://localhost:8080}
ADDR=${AGENTD_ADDR:-localhost:50051}
API=$HTTP/agentd.v1.AgentService

for tool in curl jq od grpcurl; do
	command -v "$tool" >/dev/null || {
		echo "curl-recipes: $tool not found on PATH" >&2
		exit 1
	}
done

. "$(dirname "$0")/recipes-lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

# docs/http.md's two helpers for the Connect protocol's streams, as printed there.
# frame: a Connect stream's request, one JSON message after a flag byte and its 4-byte length.
frame() { local n; n=$(printf %s "$1" | wc -c); printf "\\0\\$(printf %o $((n>>24&255)))\\$(printf %o $((n>>16&255)))\\$(printf %o $((n>>8&255)))\\$(printf %o $((n&255)))%s" "$1"; }
# unframe: a Connect stream's answer, one JSON message a line (the last one, {} or {"error":…}, ends it).
unframe() { while set -- $(head -c5 | od -An -tu1) && (($# == 5)); do head -c $(($2<<24 | $3<<16 | $4<<8 | $5)); echo; done; }

# The events of a StartRun or AttachRun stream as unframe prints them: every line but the
# last is {"event": …}, and the last, the end of the stream, is {} (OK).
well_formed='
	(.[-1] == {})
	and (.[:-1] | all(has("event")))
	and (.[:-1] | map(.event | select(has("seq")) | .seq | tonumber) | . == [range(.[0]; .[0] + length)])
	and (.[-2].event | has("runFinished"))'

header "ListAgents: a plain JSON POST"
curl -sS -H 'Content-Type: application/json' -d '{}' "$API/ListAgents" | tee agents.json | jq -c '[.agents[] | {name, isDefault}]'
expect "the demo agent is listed, as the default" agents.json 'any(.agents[]; .name == "demo" and .isDefault == true)'

header "ExecuteRun: one question, the outcome only"
curl -sS -H 'Content-Type: application/json' -d '{"start":{"input":"what is 12*7?"}}' "$API/ExecuteRun" | tee execute.json | jq -c '{runId, reason: .result.reason, finalText: .result.finalText}'
expect "the run completed, answering 12*7 = 84" execute.json '.result.reason == "RUN_END_REASON_COMPLETED" and .result.finalText == "12*7 = 84"'

header "a bad request is the client's error, named (HTTP 400, INVALID_ARGUMENT)"
status=$(curl -sS -o bad.json -w '%{http_code}' -H 'Content-Type: application/json' -d '{"start":{"inptu":"hi"}}' "$API/ExecuteRun")
cat bad.json
echo
[[ $status == 400 ]] || fail "HTTP status $status, want 400" bad.json
expect "the error names the unknown field" bad.json '.code == 3 and (.message | contains("inptu"))'

header "StartRun: the events stream as JSON lines (the Connect protocol's framing)"
frame '{"start":{"input":"what is 12*7?"}}' |
	curl -sSN -H 'Content-Type: application/connect+json' --data-binary @- "$API/StartRun" | unframe | tee events.json | cut -c1-120
expect_events "the stream is well formed, run_started first" events.json "$well_formed and (.[0].event | has(\"runStarted\"))"
expect_events "the answer streamed as text deltas that make the final text" events.json \
	'([.[].event.textDelta.delta // empty] | join("")) as $s | $s == "12*7 = 84" and $s == .[-2].event.runFinished.finalText'

header "StartRun: a note to save ends the run AWAITING_INPUT, then ExecuteRun resumes it with an approval"
frame '{"start":{"input":"save a note: buy milk"}}' |
	curl -sSN -H 'Content-Type: application/connect+json' --data-binary @- "$API/StartRun" | unframe >parked.json
expect_events "the run asked to approve save_note, and ended AWAITING_INPUT" parked.json \
	'.[-2].event.runFinished | .reason == "RUN_END_REASON_AWAITING_INPUT" and .pendingApprovals[0].toolName == "save_note"'
jq -s '.[-2].event.runFinished | {start: {
	messages: .newMessages,
	continuation: .continuation,
	decisions: [{approvalId: .pendingApprovals[0].approvalId, outcome: "APPROVAL_OUTCOME_APPROVED"}]
}}' parked.json |
	curl -sS -H 'Content-Type: application/json' -d @- "$API/ExecuteRun" | tee resumed.json | jq -c '{reason: .result.reason, finalText: .result.finalText}'
expect "save_note ran, and the run completed" resumed.json \
	'.result.reason == "RUN_END_REASON_COMPLETED" and (.result.finalText | startswith("Saved your note \"Buy milk\""))'

header "AttachRun and SendRunInput: a run waits for an approval; curl watches it and approves"
# The run's own client is a Run stream (here grpcurl's) that never answers.
approval_waiting
# What docs/http.md shows: attach from the start, and approve from another terminal.
frame "{\"runId\":\"$run_id\"}" |
	curl -sSN -H 'Content-Type: application/connect+json' --data-binary @- "$API/AttachRun" | unframe >attached.json &
attach=$!
# The decision goes once AttachRun has said what the run waits for.
for _ in $(seq 100); do
	head -n1 attached.json 2>/dev/null | jq -e '.event | has("attached")' >/dev/null 2>&1 && break
	sleep 0.1
done
curl -sS -H 'Content-Type: application/json' \
	-d "{\"runId\":\"$run_id\",\"clientKey\":\"approve-1\",\"approvalDecision\":{\"approvalId\":\"$approval_id\",\"outcome\":\"APPROVAL_OUTCOME_APPROVED\"}}" \
	"$API/SendRunInput" | tee decided.json
echo
expect "the decision was accepted" decided.json '.ack.accepted == true and .ack.clientKey == "approve-1"'
wait "$attach"
exec 3>&-
wait "$first"
expect_events "AttachRun said the run waits on that approval, then streamed it to its end" attached.json \
	"(.[0].event.attached.state == \"RUN_STATE_WAITING\") and (.[0].event.attached.pendingApprovals[0].approvalId == \"$approval_id\") and (.[1:] | $well_formed)"
expect_events "save_note ran after the decision, and the run completed" attached.json \
	'(map(.event.inputAck.clientKey == "approve-1") | index(true)) < (map(.event | has("toolExecutionStarted")) | index(true))
	 and (.[-2].event.runFinished.reason == "RUN_END_REASON_COMPLETED")'

header "a thread kept on the server, and GetThread"
curl -sS -H 'Content-Type: application/json' -d '{"start":{"input":"what is 2*3?","history":"HISTORY_THREAD"}}' "$API/ExecuteRun" >turn1.json
thread_id=$(jq -r .threadId turn1.json)
curl -sS -H 'Content-Type: application/json' -d "{\"start\":{\"threadId\":\"$thread_id\",\"input\":\"what is 4*5?\",\"history\":\"HISTORY_THREAD\"}}" "$API/ExecuteRun" >turn2.json
curl -sS -H 'Content-Type: application/json' -d "{\"threadId\":\"$thread_id\"}" "$API/GetThread" | tee thread.json | jq -c '[.messages[] | {role, text: .parts[0].text}]'
expect "the thread holds both turns" thread.json '.messages[0].parts[0].text == "what is 2*3?" and .messages[4].parts[0].text == "what is 4*5?"'

printf '\nall %d curl recipes passed against %s\n' "$step" "$HTTP"
