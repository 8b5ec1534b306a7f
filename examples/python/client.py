#!/usr/bin/env python3
"""A small agentd client on grpcio, with the stubs buf generates in gen/python.

It lists the agents, then holds one conversation on a Run stream: it asks the demo agent to
save a note, steers the run while the approval is pending, approves the call with edited
arguments, and prints the final answer.

    apt-get install python3-grpcio python3-protobuf   # Debian's grpcio and protobuf
    go run ./cmd/agentd --demo-delay 0 &              # agentd with the built-in demo agent
    AGENTD_ADDR=localhost:50051 /usr/bin/python3 examples/python/client.py

AGENTD_TOKEN, when set, is sent as "authorization: Bearer <token>" (agentd's
--auth-tokens-file). The connection is plaintext; for TLS use grpc.secure_channel.

The stubs need no install: this file puts gen/python on sys.path. Use the Python the packages
were installed for (Debian's /usr/bin/python3 for python3-grpcio), or pip's grpcio and
protobuf in any other: the stubs come from Debian's protoc 3.21 and need protobuf 3.20 or later.

The conversation, and why it is deterministic:
  1. start         "save a note: buy milk"; the demo model calls save_note, which needs an
                   approval: agentd sends approval_requested and waits (the Run stream's
                   default policy is ASK).
  2. steer         NEXT_STEP "also, what is 6*7?", sent while the approval is pending, so it is
                   queued before the call runs and enters the transcript before the next model
                   call, whatever the timing. Its input_ack comes before anything it causes.
  3. decision      once the steer is acked: APPROVED, with edited arguments (the note's text
                   gets ", it's urgent"); save_note runs with them.
  4. next step     steer_applied; the model answers the steer with a calculate call.
  5. run_finished  COMPLETED, final text "6*7 = 42". The client half-closes its side.
"""

import dataclasses
import json
import os
import pathlib
import queue
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "gen" / "python"))

import grpc  # noqa: E402
from google.protobuf import json_format, struct_pb2  # noqa: E402

from agentd.v1 import agent_service_pb2 as service_pb  # noqa: E402
from agentd.v1 import agent_service_pb2_grpc as service_grpc  # noqa: E402
from agentd.v1 import events_pb2 as events_pb  # noqa: E402
from agentd.v1 import run_pb2 as run_pb  # noqa: E402

INPUT = "save a note: buy milk"
STEER = "also, what is 6*7?"
EDITED_ARGUMENTS = {"title": "Buy milk", "text": "buy milk, it's urgent"}


@dataclasses.dataclass
class Conversation:
    """What the client saw."""

    agents: list = dataclasses.field(default_factory=list)
    kinds: list = dataclasses.field(default_factory=list)  # event kinds, in order
    acks: list = dataclasses.field(default_factory=list)  # (client_seq, accepted, error)
    approved_arguments: str = ""
    tool_results: list = dataclasses.field(default_factory=list)  # (name, output, is_error)
    steer_applied: tuple = ()  # (client_seq, dropped)
    text: str = ""  # every text delta, joined
    finished: events_pb.RunFinished = None

    @property
    def final_text(self):
        return self.finished.final_text if self.finished else ""


class _Outbox:
    """The request stream of the Run call: send() queues a request, end() half-closes."""

    _END = object()

    def __init__(self):
        self._q = queue.Queue()
        self._seq = 0

    def send(self, **kind):
        self._seq += 1
        self._q.put(service_pb.RunRequest(client_seq=self._seq, **kind))
        return self._seq

    def end(self):
        self._q.put(self._END)

    def __iter__(self):
        while (req := self._q.get()) is not self._END:
            yield req


def converse(addr, token=None, log=lambda line: None, timeout=30.0):
    """Lists the agents, then runs the conversation described at the top of this file."""
    conv = Conversation()
    metadata = [("authorization", f"Bearer {token}")] if token else None
    with grpc.insecure_channel(addr) as channel:
        stub = service_grpc.AgentServiceStub(channel)
        conv.agents = list(stub.ListAgents(service_pb.ListAgentsRequest(), timeout=timeout, metadata=metadata).agents)
        for a in conv.agents:
            log(f"agent {a.name} ({a.model}): {', '.join(t.spec.name for t in a.tools)}")

        out = _Outbox()
        out.send(start=run_pb.RunSpec(input=INPUT))
        approval_id = steer_seq = None
        responses = stub.Run(iter(out), timeout=timeout, metadata=metadata)
        try:
            for resp in responses:
                ev = resp.event
                kind = ev.WhichOneof("kind")
                if kind is None:
                    continue  # an event kind newer than these stubs
                conv.kinds.append(kind)
                if kind == "run_started":
                    s = ev.run_started
                    log(f"run {s.run_id} started: agent {s.agent}, model {s.model}")
                elif kind == "approval_requested":
                    # 2. Steer while the approval is pending; decide once the steer is acked.
                    a = ev.approval_requested
                    log(f"approval requested for {a.tool_name} {a.arguments_json}")
                    approval_id = a.approval_id
                    steer_seq = out.send(steer=run_pb.Steer(text=STEER, mode=run_pb.STEER_MODE_NEXT_STEP))
                    log(f"steer #{steer_seq} sent: {STEER!r}")
                elif kind == "input_ack":
                    a = ev.input_ack
                    error = f"{a.error.reason}: {a.error.message}" if a.HasField("error") else None
                    conv.acks.append((a.client_seq, a.accepted, error))
                    log(f"ack #{a.client_seq}: {'accepted' if a.accepted else f'refused ({error})'}")
                    if a.client_seq == steer_seq and approval_id is not None:
                        # 3. Approve, with edited arguments.
                        edited = json_format.ParseDict(EDITED_ARGUMENTS, struct_pb2.Value())
                        seq = out.send(approval_decision=run_pb.ApprovalDecision(
                            approval_id=approval_id,
                            outcome=run_pb.APPROVAL_OUTCOME_APPROVED,
                            edited_arguments=edited,
                        ))
                        log(f"decision #{seq} sent: approve with {json.dumps(EDITED_ARGUMENTS)}")
                elif kind == "approval_resolved":
                    r = ev.approval_resolved
                    conv.approved_arguments = r.arguments_json
                    log(f"approval resolved: {run_pb.ApprovalOutcome.Name(r.outcome)} with {r.arguments_json}")
                elif kind == "tool_call_result":
                    r = ev.tool_call_result
                    output = json_format.MessageToDict(r.json) if r.WhichOneof("output") == "json" else r.text
                    conv.tool_results.append((r.name, output, r.is_error))
                    log(f"{r.name} -> {json.dumps(output)}")
                elif kind == "steer_applied":
                    s = ev.steer_applied
                    if s.client_seq == 0:  # RunSpec.input enters the transcript the same way
                        log("input entered the transcript")
                    else:
                        conv.steer_applied = (s.client_seq, s.dropped)
                        log(f"steer #{s.client_seq} dropped: {s.drop_reason}" if s.dropped else f"steer #{s.client_seq} applied")
                elif kind == "text_delta":
                    # Append, never count: a client behind gets several of the model's
                    # deltas merged into one, so delta boundaries carry no meaning.
                    conv.text += ev.text_delta.delta
                elif kind == "run_finished":
                    conv.finished = ev.run_finished
                    log(f"run finished: {events_pb.RunEndReason.Name(ev.run_finished.reason)}")
                    out.end()  # 5. Nothing more to say: half-close.
        finally:
            out.end()
            responses.cancel()  # a no-op once the call has ended
    if conv.finished is None:
        raise RuntimeError("the stream ended without run_finished")
    return conv


def main():
    addr = os.environ.get("AGENTD_ADDR") or "localhost:50051"
    try:
        conv = converse(addr, token=os.environ.get("AGENTD_TOKEN"), log=print)
    except grpc.RpcError as err:
        print(f"agentd at {addr}: {err.code().name}: {err.details()}", file=sys.stderr)
        return 1
    print(f"\nfinal text: {conv.final_text}")
    return 0 if conv.finished.reason == events_pb.RUN_END_REASON_COMPLETED else 1


if __name__ == "__main__":
    sys.exit(main())
