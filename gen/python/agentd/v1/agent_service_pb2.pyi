from agentd.v1 import events_pb2 as _events_pb2
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

DESCRIPTOR: _descriptor.FileDescriptor
TOOL_APPROVAL_ALWAYS: ToolApproval
TOOL_APPROVAL_ASK: ToolApproval
TOOL_APPROVAL_AUTO: ToolApproval
TOOL_APPROVAL_UNSPECIFIED: ToolApproval

class Agent(_message.Message):
    __slots__ = ["description", "is_default", "max_steps", "model", "model_override_allowed", "name", "output_schema", "run_output_schema_allowed", "tools"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MODEL_OVERRIDE_ALLOWED_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    RUN_OUTPUT_SCHEMA_ALLOWED_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    description: str
    is_default: bool
    max_steps: int
    model: str
    model_override_allowed: bool
    name: str
    output_schema: _struct_pb2.Struct
    run_output_schema_allowed: bool
    tools: _containers.RepeatedCompositeFieldContainer[ToolInfo]
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., model: _Optional[str] = ..., model_override_allowed: bool = ..., max_steps: _Optional[int] = ..., tools: _Optional[_Iterable[_Union[ToolInfo, _Mapping]]] = ..., is_default: bool = ..., output_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., run_output_schema_allowed: bool = ...) -> None: ...

class Attach(_message.Message):
    __slots__ = ["after_seq", "run_id"]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    after_seq: int
    run_id: str
    def __init__(self, run_id: _Optional[str] = ..., after_seq: _Optional[int] = ...) -> None: ...

class AttachRunRequest(_message.Message):
    __slots__ = ["after_seq", "run_id"]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    after_seq: int
    run_id: str
    def __init__(self, run_id: _Optional[str] = ..., after_seq: _Optional[int] = ...) -> None: ...

class AttachRunResponse(_message.Message):
    __slots__ = ["event"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: _events_pb2.RunEvent
    def __init__(self, event: _Optional[_Union[_events_pb2.RunEvent, _Mapping]] = ...) -> None: ...

class DeleteThreadRequest(_message.Message):
    __slots__ = ["thread_id"]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    def __init__(self, thread_id: _Optional[str] = ...) -> None: ...

class DeleteThreadResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ExecuteRunRequest(_message.Message):
    __slots__ = ["start"]
    START_FIELD_NUMBER: _ClassVar[int]
    start: _run_pb2.RunSpec
    def __init__(self, start: _Optional[_Union[_run_pb2.RunSpec, _Mapping]] = ...) -> None: ...

class ExecuteRunResponse(_message.Message):
    __slots__ = ["result", "run_id", "thread_id", "trace_id"]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    result: _events_pb2.RunFinished
    run_id: str
    thread_id: str
    trace_id: str
    def __init__(self, run_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., trace_id: _Optional[str] = ..., result: _Optional[_Union[_events_pb2.RunFinished, _Mapping]] = ...) -> None: ...

class GetThreadRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "thread_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    thread_id: str
    def __init__(self, thread_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class GetThreadResponse(_message.Message):
    __slots__ = ["messages", "next_page_token", "thread"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    THREAD_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_transcript_pb2.Message]
    next_page_token: str
    thread: Thread
    def __init__(self, thread: _Optional[_Union[Thread, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[_transcript_pb2.Message, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class Grant(_message.Message):
    __slots__ = ["agent", "any_arguments", "approval_id", "arguments_json", "created_at", "grant_id", "run_id", "scope", "tool_name"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ANY_ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    agent: str
    any_arguments: bool
    approval_id: str
    arguments_json: str
    created_at: _timestamp_pb2.Timestamp
    grant_id: str
    run_id: str
    scope: _run_pb2.ApprovalScope
    tool_name: str
    def __init__(self, grant_id: _Optional[str] = ..., scope: _Optional[_Union[_run_pb2.ApprovalScope, str]] = ..., agent: _Optional[str] = ..., tool_name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., any_arguments: bool = ..., run_id: _Optional[str] = ..., approval_id: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListAgentsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListAgentsResponse(_message.Message):
    __slots__ = ["agents"]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedCompositeFieldContainer[Agent]
    def __init__(self, agents: _Optional[_Iterable[_Union[Agent, _Mapping]]] = ...) -> None: ...

class ListThreadsRequest(_message.Message):
    __slots__ = ["page_size", "page_token"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListThreadsResponse(_message.Message):
    __slots__ = ["next_page_token", "threads"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    THREADS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    threads: _containers.RepeatedCompositeFieldContainer[Thread]
    def __init__(self, threads: _Optional[_Iterable[_Union[Thread, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RevokeGrantRequest(_message.Message):
    __slots__ = ["grant_id", "thread_id"]
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    grant_id: str
    thread_id: str
    def __init__(self, thread_id: _Optional[str] = ..., grant_id: _Optional[str] = ...) -> None: ...

class RevokeGrantResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class RunRequest(_message.Message):
    __slots__ = ["approval_decision", "attach", "cancel", "client_seq", "ping", "start", "steer", "tool_result"]
    APPROVAL_DECISION_FIELD_NUMBER: _ClassVar[int]
    ATTACH_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    STEER_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    approval_decision: _run_pb2.ApprovalDecision
    attach: Attach
    cancel: _run_pb2.Cancel
    client_seq: int
    ping: _run_pb2.Ping
    start: _run_pb2.RunSpec
    steer: _run_pb2.Steer
    tool_result: _run_pb2.ToolResult
    def __init__(self, client_seq: _Optional[int] = ..., start: _Optional[_Union[_run_pb2.RunSpec, _Mapping]] = ..., approval_decision: _Optional[_Union[_run_pb2.ApprovalDecision, _Mapping]] = ..., steer: _Optional[_Union[_run_pb2.Steer, _Mapping]] = ..., tool_result: _Optional[_Union[_run_pb2.ToolResult, _Mapping]] = ..., cancel: _Optional[_Union[_run_pb2.Cancel, _Mapping]] = ..., ping: _Optional[_Union[_run_pb2.Ping, _Mapping]] = ..., attach: _Optional[_Union[Attach, _Mapping]] = ...) -> None: ...

class RunResponse(_message.Message):
    __slots__ = ["event"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: _events_pb2.RunEvent
    def __init__(self, event: _Optional[_Union[_events_pb2.RunEvent, _Mapping]] = ...) -> None: ...

class SendRunInputRequest(_message.Message):
    __slots__ = ["approval_decision", "cancel", "client_key", "run_id", "steer", "tool_result"]
    APPROVAL_DECISION_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    CLIENT_KEY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEER_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    approval_decision: _run_pb2.ApprovalDecision
    cancel: _run_pb2.Cancel
    client_key: str
    run_id: str
    steer: _run_pb2.Steer
    tool_result: _run_pb2.ToolResult
    def __init__(self, run_id: _Optional[str] = ..., client_key: _Optional[str] = ..., approval_decision: _Optional[_Union[_run_pb2.ApprovalDecision, _Mapping]] = ..., steer: _Optional[_Union[_run_pb2.Steer, _Mapping]] = ..., tool_result: _Optional[_Union[_run_pb2.ToolResult, _Mapping]] = ..., cancel: _Optional[_Union[_run_pb2.Cancel, _Mapping]] = ...) -> None: ...

class SendRunInputResponse(_message.Message):
    __slots__ = ["ack", "seq"]
    ACK_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ack: _events_pb2.InputAck
    seq: int
    def __init__(self, ack: _Optional[_Union[_events_pb2.InputAck, _Mapping]] = ..., seq: _Optional[int] = ...) -> None: ...

class StartRunRequest(_message.Message):
    __slots__ = ["start"]
    START_FIELD_NUMBER: _ClassVar[int]
    start: _run_pb2.RunSpec
    def __init__(self, start: _Optional[_Union[_run_pb2.RunSpec, _Mapping]] = ...) -> None: ...

class StartRunResponse(_message.Message):
    __slots__ = ["event"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: _events_pb2.RunEvent
    def __init__(self, event: _Optional[_Union[_events_pb2.RunEvent, _Mapping]] = ...) -> None: ...

class Thread(_message.Message):
    __slots__ = ["active_run_id", "agent", "created_at", "grants", "message_count", "thread_id", "updated_at"]
    ACTIVE_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    active_run_id: str
    agent: str
    created_at: _timestamp_pb2.Timestamp
    grants: _containers.RepeatedCompositeFieldContainer[Grant]
    message_count: int
    thread_id: str
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, thread_id: _Optional[str] = ..., agent: _Optional[str] = ..., message_count: _Optional[int] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., active_run_id: _Optional[str] = ..., grants: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ...) -> None: ...

class ToolInfo(_message.Message):
    __slots__ = ["approval", "completes_run", "enabled", "parallel", "requires_approval", "source", "spec", "timeout"]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    COMPLETES_RUN_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    approval: ToolApproval
    completes_run: bool
    enabled: bool
    parallel: bool
    requires_approval: bool
    source: str
    spec: _transcript_pb2.ToolSpec
    timeout: _duration_pb2.Duration
    def __init__(self, spec: _Optional[_Union[_transcript_pb2.ToolSpec, _Mapping]] = ..., source: _Optional[str] = ..., enabled: bool = ..., requires_approval: bool = ..., completes_run: bool = ..., timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., parallel: bool = ..., approval: _Optional[_Union[ToolApproval, str]] = ...) -> None: ...

class ToolApproval(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
