#!/usr/bin/env bash
# Runs the grpcurl recipes of docs/clients.md and docs/runs.md against a
# running agentd and checks what they print, so that the docs and the service cannot
# drift apart. CI runs it through TestEndToEndGrpcurlRecipes (cmd/agentd/e2e_test.go),
# which builds and starts agentd on a loopback port first.
#
#   go run ./cmd/agentd --demo-delay 0 &       # the built-in demo agent, no API key needed
#   bash scripts/grpcurl-recipes.sh            # or AGENTD_ADDR=host:port bash scripts/...
#
# Needs grpcurl and jq:
#   go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4
#   apt-get install -y jq
set -euo pipefail

ADDR=${AGENTD_ADDR:-localhost:50051}

if ! command -v grpcurl >/dev/null; then
	echo "grpcurl-recipes: grpcurl not found on PATH; install it with:" >&2
	echo "  go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4   (and put \$(go env GOPATH)/bin on PATH)" >&2
	exit 1
fi
if ! command -v jq >/dev/null; then
	echo "grpcurl-recipes: jq not found on PATH; install it with: apt-get install -y jq (brew install jq on macOS)" >&2
	exit 1
fi

. "$(dirname "$0")/recipes-lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

# A well-formed stream: seq is 1, 2, 3, … with no gaps, there is one run_started and one
# run_finished, run_started comes first and run_finished last, and every event names the
# same run.
well_formed='
	(map(.event.seq | tonumber) == [range(1; length + 1)])
	and (map(select(.event | has("runStarted"))) | length == 1)
	and (map(select(.event | has("runFinished"))) | length == 1)
	and (.[0].event | has("runStarted"))
	and (.[-1].event | has("runFinished"))
	and (map(.event.runId) | unique | length == 1)'

header "list the services (reflection)"
grpcurl -plaintext "$ADDR" list | tee list.txt
expect_line "AgentService is served" list.txt agentd.v1.AgentService
expect_line "health is served" list.txt grpc.health.v1.Health
expect_line "reflection v1 is served" list.txt grpc.reflection.v1.ServerReflection

header "describe agentd.v1.AgentService"
grpcurl -plaintext "$ADDR" describe agentd.v1.AgentService | tee describe.txt
expect_line "Run is a bidi stream" describe.txt "  rpc Run ( stream .agentd.v1.RunRequest ) returns ( stream .agentd.v1.RunResponse );"
expect_line "StartRun is a server stream" describe.txt "  rpc StartRun ( .agentd.v1.StartRunRequest ) returns ( stream .agentd.v1.StartRunResponse );"
expect_line "ExecuteRun is unary" describe.txt "  rpc ExecuteRun ( .agentd.v1.ExecuteRunRequest ) returns ( .agentd.v1.ExecuteRunResponse );"
expect_line "ListAgents is unary" describe.txt "  rpc ListAgents ( .agentd.v1.ListAgentsRequest ) returns ( .agentd.v1.ListAgentsResponse );"
expect_line "AttachRun is a server stream" describe.txt "  rpc AttachRun ( .agentd.v1.AttachRunRequest ) returns ( stream .agentd.v1.AttachRunResponse );"
expect_line "DeleteThread is unary" describe.txt "  rpc DeleteThread ( .agentd.v1.DeleteThreadRequest ) returns ( .agentd.v1.DeleteThreadResponse );"
expect_line "GetThread is unary" describe.txt "  rpc GetThread ( .agentd.v1.GetThreadRequest ) returns ( .agentd.v1.GetThreadResponse );"
expect_line "ListThreads is unary" describe.txt "  rpc ListThreads ( .agentd.v1.ListThreadsRequest ) returns ( .agentd.v1.ListThreadsResponse );"
expect_line "RevokeGrant is unary" describe.txt "  rpc RevokeGrant ( .agentd.v1.RevokeGrantRequest ) returns ( .agentd.v1.RevokeGrantResponse );"
expect_line "SendRunInput is unary" describe.txt "  rpc SendRunInput ( .agentd.v1.SendRunInputRequest ) returns ( .agentd.v1.SendRunInputResponse );"
[ "$(grep -c "^  rpc " describe.txt)" = 10 ] || { echo "describe lists $(grep -c "^  rpc " describe.txt) RPCs, not the ten docs/clients.md shows" >&2; exit 1; }

header "health of agentd.v1.AgentService"
grpcurl -plaintext -d '{"service":"agentd.v1.AgentService"}' "$ADDR" grpc.health.v1.Health/Check | tee health.json
expect "AgentService is SERVING" health.json '.status == "SERVING"'

header "ListAgents"
grpcurl -plaintext "$ADDR" agentd.v1.AgentService/ListAgents | tee agents.json
expect "the demo agent is listed" agents.json 'any(.agents[]; .name == "demo")'
expect "demo has current_time, calculate and save_note" agents.json \
	'(.agents[] | select(.name == "demo") | [.tools[].spec.name]) as $t | ["current_time", "calculate", "save_note"] - $t == []'
expect "save_note requires an approval" agents.json \
	'.agents[] | select(.name == "demo") | .tools[] | select(.spec.name == "save_note") | .requiresApproval == true'

header "ExecuteRun: one question, the outcome only"
grpcurl -plaintext -d '{"start":{"input":"what is 12*7?"}}' "$ADDR" agentd.v1.AgentService/ExecuteRun | tee execute.json
expect "the run completed" execute.json '.result.reason == "RUN_END_REASON_COMPLETED"'
expect "the model used the calculate tool" execute.json \
	'[.result.newMessages[].parts[].toolCall.name // empty] == ["calculate"]'
expect "calculate gave 84" execute.json \
	'any(.result.newMessages[].parts[].toolResult; .json.result == 84)'
expect "the answer is 12*7 = 84" execute.json '.result.finalText == "12*7 = 84"'

header "StartRun: a note to save parks the run (AWAITING_INPUT) under the default INTERRUPT policy"
grpcurl -plaintext -d '{"start":{"input":"save a note: buy milk"}}' "$ADDR" agentd.v1.AgentService/StartRun | tee parked.json
expect_events "the stream is well formed" parked.json "$well_formed"
expect_events "save_note asked for an approval" parked.json \
	'any(.[]; .event.approvalRequested.toolName == "save_note")'
expect_events "save_note did not run" parked.json \
	'all(.[]; .event | has("toolExecutionStarted") or has("toolCallResult") | not)'
expect_events "the run parked AWAITING_INPUT" parked.json \
	'.[-1].event.runFinished.reason == "RUN_END_REASON_AWAITING_INPUT"'
expect_events "one approval is pending, for save_note" parked.json \
	'.[-1].event.runFinished.pendingApprovals | length == 1 and .[0].toolName == "save_note" and (.[0].approvalId | startswith("appr_"))'
expect_events "the parked run carries a continuation" parked.json \
	'.[-1].event.runFinished.continuation | type == "string" and length > 0'

header "Run: a bidi stream from a heredoc; the half-close lets the run finish"
grpcurl -plaintext -d @ "$ADDR" agentd.v1.AgentService/Run <<'EOF' | tee run.json
{"clientSeq":1,"start":{"input":"what time is it?"}}
{"clientSeq":2,"ping":{}}
EOF
expect_events "the stream is well formed" run.json "$well_formed"
expect_events "the model called current_time and got its result" run.json \
	'any(.[]; .event.toolCallResult.name == "current_time" and (.event.toolCallResult.isError | not))'
expect_events "the answer streamed as text deltas that make the final text" run.json \
	'([.[].event.textDelta.delta // empty] | join("")) as $streamed | $streamed != "" and $streamed == .[-1].event.runFinished.finalText'
expect_events "the run completed" run.json '.[-1].event.runFinished.reason == "RUN_END_REASON_COMPLETED"'
# JSON leaves false out: a refused ack has no "accepted" at all.
expect_events "no client message was refused" run.json \
	'all(.[].event | select(has("inputAck")) | .inputAck; .accepted == true)'
# The ping is acked when the server reads it before the run ends; with an instant model
# the run may end first, and then agentd acks nothing more.
if jq -e -s 'any(.[]; .event.inputAck.clientSeq == "2")' run.json >/dev/null; then
	expect_events "the ping (clientSeq 2) was accepted" run.json \
		'any(.[]; .event.inputAck | .clientSeq == "2" and .accepted == true)'
else
	echo "note: the run finished before the ping was read, so it got no input_ack"
fi

header "ExecuteRun: resume the parked run with an approval, from StartRun's run_finished"
jq -s '.[-1].event.runFinished | {start: {
	messages: .newMessages,
	continuation: .continuation,
	decisions: [{approvalId: .pendingApprovals[0].approvalId, outcome: "APPROVAL_OUTCOME_APPROVED"}]
}}' parked.json |
	grpcurl -plaintext -d @ "$ADDR" agentd.v1.AgentService/ExecuteRun | tee resumed.json
expect "the resumed run stays on the parked run's thread" resumed.json \
	".threadId == $(jq -s '.[0].event.runStarted.threadId' parked.json)"
expect "the resumed run completed" resumed.json '.result.reason == "RUN_END_REASON_COMPLETED"'
expect "save_note ran and saved the note" resumed.json \
	'any(.result.newMessages[].parts[].toolResult; .name == "save_note" and .json.saved == true and .json.title == "Buy milk" and (.isError | not))'
expect "the answer says the note was saved" resumed.json '.result.finalText | startswith("Saved your note \"Buy milk\"")'

header "AttachRun: replay a finished run from its journal"
grpcurl -plaintext -d "{\"runId\":$(jq '.runId' execute.json),\"afterSeq\":\"0\"}" "$ADDR" agentd.v1.AgentService/AttachRun | tee replay.json
expect_events "the first event is attached, and says the run finished" replay.json \
	'.[0].event.attached.state == "RUN_STATE_FINISHED" and (.[0].event | has("seq") | not)'
expect_events "then the run's whole journal, well formed" replay.json "$(printf '.[1:] | %s' "$well_formed")"
expect_events "its run_finished is ExecuteRun's result" replay.json \
	".[-1].event.runFinished.finalText == $(jq '.result.finalText' execute.json)"

header "Run: the run waits for an approval; a second client attaches, and approves with SendRunInput"
# The first client keeps its stream open (no half-close) and never answers.
approval_waiting
expect_events "the first client was asked to approve save_note" first.json \
	'any(.[]; .event.approvalRequested.toolName == "save_note")'
# Another terminal: attach after seq 1, then decide from a third.
grpcurl -plaintext -d "{\"runId\":\"$run_id\",\"afterSeq\":\"1\"}" "$ADDR" agentd.v1.AgentService/AttachRun >second.json &
second=$!
sleep 0.5
grpcurl -plaintext -d "{\"runId\":\"$run_id\",\"clientKey\":\"approve-1\",\"approvalDecision\":{\"approvalId\":\"$approval_id\",\"outcome\":\"APPROVAL_OUTCOME_APPROVED\"}}" \
	"$ADDR" agentd.v1.AgentService/SendRunInput | tee decided.json
expect "the decision was accepted" decided.json '.ack.accepted == true and .ack.clientKey == "approve-1"'
wait "$second"
exec 3>&-
wait "$first"
expect_events "the second client was told the run waits on that approval" second.json \
	".[0].event.attached.state == \"RUN_STATE_WAITING\" and .[0].event.attached.pendingApprovals[0].approvalId == \"$approval_id\""
expect_events "then got every event from seq 2 to run_finished" second.json \
	'(.[1:] | map(.event.seq | tonumber)) == [range(2; length + 1)] and (.[-1].event | has("runFinished"))'
expect_events "the decision's ack is in the journal, before save_note ran" second.json \
	'(map(.event.inputAck.clientKey == "approve-1") | index(true)) < (map(.event | has("toolExecutionStarted")) | index(true))'
expect_events "save_note ran and the run completed" second.json \
	'.[-1].event.runFinished.reason == "RUN_END_REASON_COMPLETED" and (.[-1].event.runFinished.finalText | startswith("Saved your note"))'
expect_events "both clients saw the same events" first.json \
	"(map(select(.event | has(\"heartbeat\") | not)) | map(.event)[1:]) == $(jq -s 'map(.event)[1:]' second.json)"

header "A conversation kept on the server: each turn sends only its new input"
grpcurl -plaintext -d '{"start":{"input":"what is 2*3?","history":"HISTORY_THREAD"}}' "$ADDR" agentd.v1.AgentService/ExecuteRun | tee turn1.json
expect "the first turn started a thread" turn1.json '.threadId | startswith("thread_")'
thread_id=$(jq -r '.threadId' turn1.json)
grpcurl -plaintext -d "{\"start\":{\"threadId\":\"$thread_id\",\"input\":\"what is 4*5?\",\"history\":\"HISTORY_THREAD\"}}" "$ADDR" agentd.v1.AgentService/ExecuteRun | tee turn2.json
expect "the second turn answered on the same thread" turn2.json ".threadId == \"$thread_id\" and .result.finalText == \"4*5 = 20\""
grpcurl -plaintext -d "{\"threadId\":\"$thread_id\"}" "$ADDR" agentd.v1.AgentService/GetThread | tee thread.json
expect "the thread holds both turns, oldest first" thread.json \
	'.thread.messageCount == "8" and .messages[0].parts[0].text == "what is 2*3?" and .messages[4].parts[0].text == "what is 4*5?"'

printf '\nall %d grpcurl recipes passed against %s\n' "$step" "$ADDR"
