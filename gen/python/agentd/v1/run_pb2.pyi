from agentd.v1 import transcript_pb2 as _transcript_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

APPROVAL_OUTCOME_APPROVED: ApprovalOutcome
APPROVAL_OUTCOME_CANCELLED: ApprovalOutcome
APPROVAL_OUTCOME_DENIED: ApprovalOutcome
APPROVAL_OUTCOME_EXPIRED: ApprovalOutcome
APPROVAL_OUTCOME_UNSPECIFIED: ApprovalOutcome
APPROVAL_POLICY_ASK: ApprovalPolicy
APPROVAL_POLICY_AUTO_APPROVE: ApprovalPolicy
APPROVAL_POLICY_AUTO_DENY: ApprovalPolicy
APPROVAL_POLICY_INTERRUPT: ApprovalPolicy
APPROVAL_POLICY_UNSPECIFIED: ApprovalPolicy
APPROVAL_SCOPE_ONCE: ApprovalScope
APPROVAL_SCOPE_RUN: ApprovalScope
APPROVAL_SCOPE_THREAD: ApprovalScope
APPROVAL_SCOPE_UNSPECIFIED: ApprovalScope
CHILD_EVENTS_ALL: ChildEvents
CHILD_EVENTS_DEFAULT: ChildEvents
CHILD_EVENTS_LIFECYCLE: ChildEvents
CHILD_EVENTS_NONE: ChildEvents
CHILD_EVENTS_UNSPECIFIED: ChildEvents
DESCRIPTOR: _descriptor.FileDescriptor
HISTORY_CLIENT: History
HISTORY_THREAD: History
HISTORY_UNSPECIFIED: History
ON_BUSY_REJECT: OnBusy
ON_BUSY_STEER: OnBusy
ON_BUSY_UNSPECIFIED: OnBusy
ON_DISCONNECT_CANCEL: OnDisconnect
ON_DISCONNECT_CONTINUE: OnDisconnect
ON_DISCONNECT_UNSPECIFIED: OnDisconnect
STEER_MODE_INTERRUPT: SteerMode
STEER_MODE_NEXT_STEP: SteerMode
STEER_MODE_UNSPECIFIED: SteerMode

class ApprovalDecision(_message.Message):
    __slots__ = ["approval_id", "edited_arguments", "outcome", "reason", "scope"]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    EDITED_ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    edited_arguments: _struct_pb2.Value
    outcome: ApprovalOutcome
    reason: str
    scope: ApprovalScope
    def __init__(self, approval_id: _Optional[str] = ..., outcome: _Optional[_Union[ApprovalOutcome, str]] = ..., edited_arguments: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., reason: _Optional[str] = ..., scope: _Optional[_Union[ApprovalScope, str]] = ...) -> None: ...

class Cancel(_message.Message):
    __slots__ = ["reason"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class Ping(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class RunConfig(_message.Message):
    __slots__ = ["approval_policy", "approval_timeout", "child_events", "max_steps", "model", "on_disconnect", "output_schema", "tool_policies"]
    APPROVAL_POLICY_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    CHILD_EVENTS_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ON_DISCONNECT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TOOL_POLICIES_FIELD_NUMBER: _ClassVar[int]
    approval_policy: ApprovalPolicy
    approval_timeout: _duration_pb2.Duration
    child_events: ChildEvents
    max_steps: int
    model: str
    on_disconnect: OnDisconnect
    output_schema: _struct_pb2.Struct
    tool_policies: _containers.RepeatedCompositeFieldContainer[ToolPolicyOverride]
    def __init__(self, model: _Optional[str] = ..., max_steps: _Optional[int] = ..., approval_policy: _Optional[_Union[ApprovalPolicy, str]] = ..., approval_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., tool_policies: _Optional[_Iterable[_Union[ToolPolicyOverride, _Mapping]]] = ..., on_disconnect: _Optional[_Union[OnDisconnect, str]] = ..., output_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., child_events: _Optional[_Union[ChildEvents, str]] = ...) -> None: ...

class RunSpec(_message.Message):
    __slots__ = ["agent", "client_tools", "config", "continuation", "decisions", "history", "input", "messages", "metadata", "on_busy", "request_id", "thread_id", "tool_results"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TOOLS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    CONTINUATION_FIELD_NUMBER: _ClassVar[int]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ON_BUSY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULTS_FIELD_NUMBER: _ClassVar[int]
    agent: str
    client_tools: _containers.RepeatedCompositeFieldContainer[_transcript_pb2.ClientTool]
    config: RunConfig
    continuation: bytes
    decisions: _containers.RepeatedCompositeFieldContainer[ApprovalDecision]
    history: History
    input: str
    messages: _containers.RepeatedCompositeFieldContainer[_transcript_pb2.Message]
    metadata: _struct_pb2.Struct
    on_busy: OnBusy
    request_id: str
    thread_id: str
    tool_results: _containers.RepeatedCompositeFieldContainer[ToolResult]
    def __init__(self, agent: _Optional[str] = ..., thread_id: _Optional[str] = ..., request_id: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_transcript_pb2.Message, _Mapping]]] = ..., input: _Optional[str] = ..., client_tools: _Optional[_Iterable[_Union[_transcript_pb2.ClientTool, _Mapping]]] = ..., config: _Optional[_Union[RunConfig, _Mapping]] = ..., continuation: _Optional[bytes] = ..., decisions: _Optional[_Iterable[_Union[ApprovalDecision, _Mapping]]] = ..., tool_results: _Optional[_Iterable[_Union[ToolResult, _Mapping]]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., history: _Optional[_Union[History, str]] = ..., on_busy: _Optional[_Union[OnBusy, str]] = ...) -> None: ...

class Steer(_message.Message):
    __slots__ = ["message", "mode", "run_id", "text"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    message: _transcript_pb2.Message
    mode: SteerMode
    run_id: str
    text: str
    def __init__(self, message: _Optional[_Union[_transcript_pb2.Message, _Mapping]] = ..., text: _Optional[str] = ..., mode: _Optional[_Union[SteerMode, str]] = ..., run_id: _Optional[str] = ...) -> None: ...

class ToolPolicyOverride(_message.Message):
    __slots__ = ["disabled", "require_approval", "tool"]
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    disabled: bool
    require_approval: bool
    tool: str
    def __init__(self, tool: _Optional[str] = ..., disabled: bool = ..., require_approval: bool = ...) -> None: ...

class ToolResult(_message.Message):
    __slots__ = ["is_error", "json", "media", "text", "tool_call_id"]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    MEDIA_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    is_error: bool
    json: _struct_pb2.Value
    media: _containers.RepeatedCompositeFieldContainer[_transcript_pb2.MediaPart]
    text: str
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., text: _Optional[str] = ..., json: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., is_error: bool = ..., media: _Optional[_Iterable[_Union[_transcript_pb2.MediaPart, _Mapping]]] = ...) -> None: ...

class History(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class OnBusy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ChildEvents(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class OnDisconnect(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ApprovalPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ApprovalScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ApprovalOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SteerMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
