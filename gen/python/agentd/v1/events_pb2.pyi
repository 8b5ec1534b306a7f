from agentd.v1 import run_pb2 as _run_pb2
from agentd.v1 import transcript_pb2 as _transcript_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DECIDED_BY_CLIENT: DecidedBy
DECIDED_BY_GRANT: DecidedBy
DECIDED_BY_HOOK: DecidedBy
DECIDED_BY_POLICY: DecidedBy
DECIDED_BY_RUN_END: DecidedBy
DECIDED_BY_TIMEOUT: DecidedBy
DECIDED_BY_UNSPECIFIED: DecidedBy
DESCRIPTOR: _descriptor.FileDescriptor
FINISH_REASON_CONTENT_FILTER: FinishReason
FINISH_REASON_ERROR: FinishReason
FINISH_REASON_INTERRUPTED: FinishReason
FINISH_REASON_LENGTH: FinishReason
FINISH_REASON_STOP: FinishReason
FINISH_REASON_TOOL_CALLS: FinishReason
FINISH_REASON_UNSPECIFIED: FinishReason
MESSAGE_KIND_REASONING: MessageKind
MESSAGE_KIND_TEXT: MessageKind
MESSAGE_KIND_UNSPECIFIED: MessageKind
RUN_END_REASON_AWAITING_INPUT: RunEndReason
RUN_END_REASON_CANCELLED: RunEndReason
RUN_END_REASON_COMPLETED: RunEndReason
RUN_END_REASON_EXPIRED: RunEndReason
RUN_END_REASON_FAILED: RunEndReason
RUN_END_REASON_MAX_STEPS: RunEndReason
RUN_END_REASON_SHUTDOWN: RunEndReason
RUN_END_REASON_STOPPED: RunEndReason
RUN_END_REASON_UNSPECIFIED: RunEndReason
RUN_STATE_FINISHED: RunState
RUN_STATE_PARKED: RunState
RUN_STATE_RUNNING: RunState
RUN_STATE_UNSPECIFIED: RunState
RUN_STATE_WAITING: RunState

class ApprovalRequested(_message.Message):
    __slots__ = ["allowed_scopes", "any_arguments", "approval_id", "arguments_json", "editable", "expires_at", "reason", "tool_call_id", "tool_name"]
    ALLOWED_SCOPES_FIELD_NUMBER: _ClassVar[int]
    ANY_ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    EDITABLE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    allowed_scopes: _containers.RepeatedScalarFieldContainer[_run_pb2.ApprovalScope]
    any_arguments: bool
    approval_id: str
    arguments_json: str
    editable: bool
    expires_at: _timestamp_pb2.Timestamp
    reason: str
    tool_call_id: str
    tool_name: str
    def __init__(self, approval_id: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., editable: bool = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ..., allowed_scopes: _Optional[_Iterable[_Union[_run_pb2.ApprovalScope, str]]] = ..., any_arguments: bool = ...) -> None: ...

class ApprovalResolved(_message.Message):
    __slots__ = ["approval_id", "arguments_json", "decided_by", "grant_id", "outcome", "reason", "scope", "tool_call_id"]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    arguments_json: str
    decided_by: DecidedBy
    grant_id: str
    outcome: _run_pb2.ApprovalOutcome
    reason: str
    scope: _run_pb2.ApprovalScope
    tool_call_id: str
    def __init__(self, approval_id: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., outcome: _Optional[_Union[_run_pb2.ApprovalOutcome, str]] = ..., decided_by: _Optional[_Union[DecidedBy, str]] = ..., arguments_json: _Optional[str] = ..., reason: _Optional[str] = ..., grant_id: _Optional[str] = ..., scope: _Optional[_Union[_run_pb2.ApprovalScope, str]] = ...) -> None: ...

class Attached(_message.Message):
    __slots__ = ["agent", "attachment_id", "last_seq", "oldest_seq", "pending_approvals", "pending_client_tool_call_ids", "request_id", "state", "thread_id", "usage"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENT_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    OLDEST_SEQ_FIELD_NUMBER: _ClassVar[int]
    PENDING_APPROVALS_FIELD_NUMBER: _ClassVar[int]
    PENDING_CLIENT_TOOL_CALL_IDS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    agent: str
    attachment_id: str
    last_seq: int
    oldest_seq: int
    pending_approvals: _containers.RepeatedCompositeFieldContainer[ApprovalRequested]
    pending_client_tool_call_ids: _containers.RepeatedScalarFieldContainer[str]
    request_id: str
    state: RunState
    thread_id: str
    usage: _transcript_pb2.Usage
    def __init__(self, thread_id: _Optional[str] = ..., agent: _Optional[str] = ..., state: _Optional[_Union[RunState, str]] = ..., last_seq: _Optional[int] = ..., oldest_seq: _Optional[int] = ..., pending_approvals: _Optional[_Iterable[_Union[ApprovalRequested, _Mapping]]] = ..., pending_client_tool_call_ids: _Optional[_Iterable[str]] = ..., usage: _Optional[_Union[_transcript_pb2.Usage, _Mapping]] = ..., request_id: _Optional[str] = ..., attachment_id: _Optional[str] = ...) -> None: ...

class Checkpoint(_message.Message):
    __slots__ = ["continuation", "step_id"]
    CONTINUATION_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    continuation: bytes
    step_id: str
    def __init__(self, continuation: _Optional[bytes] = ..., step_id: _Optional[str] = ...) -> None: ...

class ChildEvent(_message.Message):
    __slots__ = ["agent_path", "event", "parent_run_id", "parent_tool_call_id", "run_id"]
    AGENT_PATH_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    PARENT_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    agent_path: _containers.RepeatedScalarFieldContainer[str]
    event: RunEvent
    parent_run_id: str
    parent_tool_call_id: str
    run_id: str
    def __init__(self, run_id: _Optional[str] = ..., parent_run_id: _Optional[str] = ..., parent_tool_call_id: _Optional[str] = ..., agent_path: _Optional[_Iterable[str]] = ..., event: _Optional[_Union[RunEvent, _Mapping]] = ...) -> None: ...

class ChildUsage(_message.Message):
    __slots__ = ["agent_path", "parent_run_id", "reason", "run_id", "usage"]
    AGENT_PATH_FIELD_NUMBER: _ClassVar[int]
    PARENT_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    agent_path: _containers.RepeatedScalarFieldContainer[str]
    parent_run_id: str
    reason: RunEndReason
    run_id: str
    usage: _transcript_pb2.Usage
    def __init__(self, run_id: _Optional[str] = ..., parent_run_id: _Optional[str] = ..., agent_path: _Optional[_Iterable[str]] = ..., usage: _Optional[_Union[_transcript_pb2.Usage, _Mapping]] = ..., reason: _Optional[_Union[RunEndReason, str]] = ...) -> None: ...

class GoAway(_message.Message):
    __slots__ = ["time_left"]
    TIME_LEFT_FIELD_NUMBER: _ClassVar[int]
    time_left: _duration_pb2.Duration
    def __init__(self, time_left: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ["last_seq"]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    last_seq: int
    def __init__(self, last_seq: _Optional[int] = ...) -> None: ...

class HookEvent(_message.Message):
    __slots__ = ["name", "value"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: _struct_pb2.Value
    def __init__(self, name: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class InputAck(_message.Message):
    __slots__ = ["accepted", "attachment_id", "client_key", "client_seq", "error"]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_KEY_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    attachment_id: str
    client_key: str
    client_seq: int
    error: RunError
    def __init__(self, client_seq: _Optional[int] = ..., accepted: bool = ..., error: _Optional[_Union[RunError, _Mapping]] = ..., client_key: _Optional[str] = ..., attachment_id: _Optional[str] = ...) -> None: ...

class MessageFinished(_message.Message):
    __slots__ = ["abandoned", "kind", "message_id", "partial", "reasoning_state", "role"]
    ABANDONED_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    REASONING_STATE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    abandoned: bool
    kind: MessageKind
    message_id: str
    partial: bool
    reasoning_state: bytes
    role: _transcript_pb2.Role
    def __init__(self, message_id: _Optional[str] = ..., role: _Optional[_Union[_transcript_pb2.Role, str]] = ..., kind: _Optional[_Union[MessageKind, str]] = ..., reasoning_state: _Optional[bytes] = ..., partial: bool = ..., abandoned: bool = ...) -> None: ...

class MessageStarted(_message.Message):
    __slots__ = ["kind", "message_id", "parent_message_id", "role", "step_id"]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    kind: MessageKind
    message_id: str
    parent_message_id: str
    role: _transcript_pb2.Role
    step_id: str
    def __init__(self, message_id: _Optional[str] = ..., role: _Optional[_Union[_transcript_pb2.Role, str]] = ..., kind: _Optional[_Union[MessageKind, str]] = ..., step_id: _Optional[str] = ..., parent_message_id: _Optional[str] = ...) -> None: ...

class ReasoningDelta(_message.Message):
    __slots__ = ["delta", "message_id"]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    delta: str
    message_id: str
    def __init__(self, message_id: _Optional[str] = ..., delta: _Optional[str] = ...) -> None: ...

class RunError(_message.Message):
    __slots__ = ["code", "message", "metadata", "reason", "retryable"]
    class MetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    metadata: _containers.ScalarMap[str, str]
    reason: str
    retryable: bool
    def __init__(self, code: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., retryable: bool = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RunEvent(_message.Message):
    __slots__ = ["approval_requested", "approval_resolved", "attached", "checkpoint", "child_event", "go_away", "heartbeat", "hook_event", "input_ack", "message_finished", "message_started", "reasoning_delta", "run_finished", "run_id", "run_started", "seq", "steer_applied", "step_finished", "step_started", "text_delta", "time", "tool_call_args_delta", "tool_call_args_done", "tool_call_result", "tool_call_started", "tool_calls_cancelled", "tool_execution_started"]
    APPROVAL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_RESOLVED_FIELD_NUMBER: _ClassVar[int]
    ATTACHED_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    CHILD_EVENT_FIELD_NUMBER: _ClassVar[int]
    GO_AWAY_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    HOOK_EVENT_FIELD_NUMBER: _ClassVar[int]
    INPUT_ACK_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FINISHED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_STARTED_FIELD_NUMBER: _ClassVar[int]
    REASONING_DELTA_FIELD_NUMBER: _ClassVar[int]
    RUN_FINISHED_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_STARTED_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    STEER_APPLIED_FIELD_NUMBER: _ClassVar[int]
    STEP_FINISHED_FIELD_NUMBER: _ClassVar[int]
    STEP_STARTED_FIELD_NUMBER: _ClassVar[int]
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_CANCELLED_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ARGS_DELTA_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ARGS_DONE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_RESULT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_STARTED_FIELD_NUMBER: _ClassVar[int]
    TOOL_EXECUTION_STARTED_FIELD_NUMBER: _ClassVar[int]
    approval_requested: ApprovalRequested
    approval_resolved: ApprovalResolved
    attached: Attached
    checkpoint: Checkpoint
    child_event: ChildEvent
    go_away: GoAway
    heartbeat: Heartbeat
    hook_event: HookEvent
    input_ack: InputAck
    message_finished: MessageFinished
    message_started: MessageStarted
    reasoning_delta: ReasoningDelta
    run_finished: RunFinished
    run_id: str
    run_started: RunStarted
    seq: int
    steer_applied: SteerApplied
    step_finished: StepFinished
    step_started: StepStarted
    text_delta: TextDelta
    time: _timestamp_pb2.Timestamp
    tool_call_args_delta: ToolCallArgsDelta
    tool_call_args_done: ToolCallArgsDone
    tool_call_result: ToolCallResult
    tool_call_started: ToolCallStarted
    tool_calls_cancelled: ToolCallsCancelled
    tool_execution_started: ToolExecutionStarted
    def __init__(self, seq: _Optional[int] = ..., run_id: _Optional[str] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., run_started: _Optional[_Union[RunStarted, _Mapping]] = ..., step_started: _Optional[_Union[StepStarted, _Mapping]] = ..., message_started: _Optional[_Union[MessageStarted, _Mapping]] = ..., message_finished: _Optional[_Union[MessageFinished, _Mapping]] = ..., text_delta: _Optional[_Union[TextDelta, _Mapping]] = ..., reasoning_delta: _Optional[_Union[ReasoningDelta, _Mapping]] = ..., tool_call_started: _Optional[_Union[ToolCallStarted, _Mapping]] = ..., tool_call_args_delta: _Optional[_Union[ToolCallArgsDelta, _Mapping]] = ..., tool_call_args_done: _Optional[_Union[ToolCallArgsDone, _Mapping]] = ..., approval_requested: _Optional[_Union[ApprovalRequested, _Mapping]] = ..., approval_resolved: _Optional[_Union[ApprovalResolved, _Mapping]] = ..., tool_execution_started: _Optional[_Union[ToolExecutionStarted, _Mapping]] = ..., tool_call_result: _Optional[_Union[ToolCallResult, _Mapping]] = ..., tool_calls_cancelled: _Optional[_Union[ToolCallsCancelled, _Mapping]] = ..., steer_applied: _Optional[_Union[SteerApplied, _Mapping]] = ..., step_finished: _Optional[_Union[StepFinished, _Mapping]] = ..., input_ack: _Optional[_Union[InputAck, _Mapping]] = ..., checkpoint: _Optional[_Union[Checkpoint, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., go_away: _Optional[_Union[GoAway, _Mapping]] = ..., hook_event: _Optional[_Union[HookEvent, _Mapping]] = ..., run_finished: _Optional[_Union[RunFinished, _Mapping]] = ..., attached: _Optional[_Union[Attached, _Mapping]] = ..., child_event: _Optional[_Union[ChildEvent, _Mapping]] = ...) -> None: ...

class RunFinished(_message.Message):
    __slots__ = ["child_usage", "continuation", "error", "final_text", "new_messages", "output", "pending_approvals", "pending_client_tool_call_ids", "reason", "tree_usage", "usage"]
    CHILD_USAGE_FIELD_NUMBER: _ClassVar[int]
    CONTINUATION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FINAL_TEXT_FIELD_NUMBER: _ClassVar[int]
    NEW_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    PENDING_APPROVALS_FIELD_NUMBER: _ClassVar[int]
    PENDING_CLIENT_TOOL_CALL_IDS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TREE_USAGE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    child_usage: _containers.RepeatedCompositeFieldContainer[ChildUsage]
    continuation: bytes
    error: RunError
    final_text: str
    new_messages: _containers.RepeatedCompositeFieldContainer[_transcript_pb2.Message]
    output: _struct_pb2.Value
    pending_approvals: _containers.RepeatedCompositeFieldContainer[ApprovalRequested]
    pending_client_tool_call_ids: _containers.RepeatedScalarFieldContainer[str]
    reason: RunEndReason
    tree_usage: _transcript_pb2.Usage
    usage: _transcript_pb2.Usage
    def __init__(self, reason: _Optional[_Union[RunEndReason, str]] = ..., error: _Optional[_Union[RunError, _Mapping]] = ..., new_messages: _Optional[_Iterable[_Union[_transcript_pb2.Message, _Mapping]]] = ..., usage: _Optional[_Union[_transcript_pb2.Usage, _Mapping]] = ..., pending_approvals: _Optional[_Iterable[_Union[ApprovalRequested, _Mapping]]] = ..., pending_client_tool_call_ids: _Optional[_Iterable[str]] = ..., continuation: _Optional[bytes] = ..., final_text: _Optional[str] = ..., output: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., tree_usage: _Optional[_Union[_transcript_pb2.Usage, _Mapping]] = ..., child_usage: _Optional[_Iterable[_Union[ChildUsage, _Mapping]]] = ...) -> None: ...

class RunStarted(_message.Message):
    __slots__ = ["agent", "depth", "model", "parent_run_id", "parent_tool_call_id", "request_id", "resumed", "root_run_id", "run_id", "thread_id", "trace_id"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PARENT_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    ROOT_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    agent: str
    depth: int
    model: str
    parent_run_id: str
    parent_tool_call_id: str
    request_id: str
    resumed: bool
    root_run_id: str
    run_id: str
    thread_id: str
    trace_id: str
    def __init__(self, run_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., agent: _Optional[str] = ..., model: _Optional[str] = ..., trace_id: _Optional[str] = ..., resumed: bool = ..., request_id: _Optional[str] = ..., parent_run_id: _Optional[str] = ..., root_run_id: _Optional[str] = ..., depth: _Optional[int] = ..., parent_tool_call_id: _Optional[str] = ...) -> None: ...

class SteerApplied(_message.Message):
    __slots__ = ["client_seq", "drop_reason", "dropped", "message_id", "step_id"]
    CLIENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    DROP_REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    client_seq: int
    drop_reason: str
    dropped: bool
    message_id: str
    step_id: str
    def __init__(self, client_seq: _Optional[int] = ..., step_id: _Optional[str] = ..., message_id: _Optional[str] = ..., dropped: bool = ..., drop_reason: _Optional[str] = ...) -> None: ...

class StepFinished(_message.Message):
    __slots__ = ["abandoned", "finish_reason", "new_messages", "step_id", "usage"]
    ABANDONED_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    NEW_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    abandoned: bool
    finish_reason: FinishReason
    new_messages: _containers.RepeatedCompositeFieldContainer[_transcript_pb2.Message]
    step_id: str
    usage: _transcript_pb2.Usage
    def __init__(self, step_id: _Optional[str] = ..., finish_reason: _Optional[_Union[FinishReason, str]] = ..., usage: _Optional[_Union[_transcript_pb2.Usage, _Mapping]] = ..., new_messages: _Optional[_Iterable[_Union[_transcript_pb2.Message, _Mapping]]] = ..., abandoned: bool = ...) -> None: ...

class StepStarted(_message.Message):
    __slots__ = ["index", "index_in_turn", "step_id", "turn"]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    INDEX_IN_TURN_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    index: int
    index_in_turn: int
    step_id: str
    turn: int
    def __init__(self, step_id: _Optional[str] = ..., index: _Optional[int] = ..., turn: _Optional[int] = ..., index_in_turn: _Optional[int] = ...) -> None: ...

class TextDelta(_message.Message):
    __slots__ = ["delta", "message_id"]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    delta: str
    message_id: str
    def __init__(self, message_id: _Optional[str] = ..., delta: _Optional[str] = ...) -> None: ...

class ToolCallArgsDelta(_message.Message):
    __slots__ = ["delta", "tool_call_id"]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    delta: str
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., delta: _Optional[str] = ...) -> None: ...

class ToolCallArgsDone(_message.Message):
    __slots__ = ["arguments_json", "tool_call_id"]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    arguments_json: str
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class ToolCallResult(_message.Message):
    __slots__ = ["duration", "is_error", "json", "media", "name", "text", "tool_call_id"]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    MEDIA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    duration: _duration_pb2.Duration
    is_error: bool
    json: _struct_pb2.Value
    media: _containers.RepeatedCompositeFieldContainer[_transcript_pb2.MediaPart]
    name: str
    text: str
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., name: _Optional[str] = ..., text: _Optional[str] = ..., json: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., is_error: bool = ..., duration: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., media: _Optional[_Iterable[_Union[_transcript_pb2.MediaPart, _Mapping]]] = ...) -> None: ...

class ToolCallStarted(_message.Message):
    __slots__ = ["executor", "message_id", "name", "step_id", "tool_call_id"]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    executor: _transcript_pb2.Executor
    message_id: str
    name: str
    step_id: str
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., name: _Optional[str] = ..., message_id: _Optional[str] = ..., executor: _Optional[_Union[_transcript_pb2.Executor, str]] = ..., step_id: _Optional[str] = ...) -> None: ...

class ToolCallsCancelled(_message.Message):
    __slots__ = ["reason", "tool_call_ids"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_IDS_FIELD_NUMBER: _ClassVar[int]
    reason: str
    tool_call_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tool_call_ids: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ...) -> None: ...

class ToolExecutionStarted(_message.Message):
    __slots__ = ["arguments_json", "child_run_id", "deadline", "executor", "name", "tool_call_id"]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    CHILD_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    arguments_json: str
    child_run_id: str
    deadline: _timestamp_pb2.Timestamp
    executor: _transcript_pb2.Executor
    name: str
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., executor: _Optional[_Union[_transcript_pb2.Executor, str]] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., child_run_id: _Optional[str] = ...) -> None: ...

class RunState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class MessageKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class DecidedBy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class FinishReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class RunEndReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
