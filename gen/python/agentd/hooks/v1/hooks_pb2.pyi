from agentd.v1 import events_pb2 as _events_pb2
from agentd.v1 import transcript_pb2 as _transcript_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DECISION_ANSWER: Decision
DECISION_CONTINUE: Decision
DECISION_DENY: Decision
DECISION_STOP: Decision
DECISION_UNSPECIFIED: Decision
DESCRIPTOR: _descriptor.FileDescriptor
GUARD_STAGE_INPUT: GuardStage
GUARD_STAGE_OUTPUT: GuardStage
GUARD_STAGE_TOOL_INPUT: GuardStage
GUARD_STAGE_TOOL_OUTPUT: GuardStage
GUARD_STAGE_UNSPECIFIED: GuardStage

class AfterModelRequest(_message.Message):
    __slots__ = ["finish_reason", "message", "run", "step", "usage"]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    finish_reason: _events_pb2.FinishReason
    message: _transcript_pb2.Message
    run: RunInfo
    step: int
    usage: _transcript_pb2.Usage
    def __init__(self, run: _Optional[_Union[RunInfo, _Mapping]] = ..., step: _Optional[int] = ..., message: _Optional[_Union[_transcript_pb2.Message, _Mapping]] = ..., usage: _Optional[_Union[_transcript_pb2.Usage, _Mapping]] = ..., finish_reason: _Optional[_Union[_events_pb2.FinishReason, str]] = ...) -> None: ...

class AfterModelResponse(_message.Message):
    __slots__ = ["decision", "events", "reason"]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    decision: Decision
    events: _containers.RepeatedCompositeFieldContainer[_events_pb2.HookEvent]
    reason: str
    def __init__(self, decision: _Optional[_Union[Decision, str]] = ..., reason: _Optional[str] = ..., events: _Optional[_Iterable[_Union[_events_pb2.HookEvent, _Mapping]]] = ...) -> None: ...

class AfterRunRequest(_message.Message):
    __slots__ = ["error", "final_text", "new_messages", "reason", "run", "usage"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FINAL_TEXT_FIELD_NUMBER: _ClassVar[int]
    NEW_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    error: str
    final_text: str
    new_messages: _containers.RepeatedCompositeFieldContainer[_transcript_pb2.Message]
    reason: _events_pb2.RunEndReason
    run: RunInfo
    usage: _transcript_pb2.Usage
    def __init__(self, run: _Optional[_Union[RunInfo, _Mapping]] = ..., reason: _Optional[_Union[_events_pb2.RunEndReason, str]] = ..., error: _Optional[str] = ..., usage: _Optional[_Union[_transcript_pb2.Usage, _Mapping]] = ..., final_text: _Optional[str] = ..., new_messages: _Optional[_Iterable[_Union[_transcript_pb2.Message, _Mapping]]] = ...) -> None: ...

class AfterRunResponse(_message.Message):
    __slots__ = ["events"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_events_pb2.HookEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[_events_pb2.HookEvent, _Mapping]]] = ...) -> None: ...

class AfterToolRequest(_message.Message):
    __slots__ = ["arguments_json", "duration", "output", "run", "tool_call_id", "tool_name"]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    arguments_json: str
    duration: _duration_pb2.Duration
    output: ToolOutput
    run: RunInfo
    tool_call_id: str
    tool_name: str
    def __init__(self, run: _Optional[_Union[RunInfo, _Mapping]] = ..., tool_call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., output: _Optional[_Union[ToolOutput, _Mapping]] = ..., duration: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class AfterToolResponse(_message.Message):
    __slots__ = ["decision", "events", "output", "reason"]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    decision: Decision
    events: _containers.RepeatedCompositeFieldContainer[_events_pb2.HookEvent]
    output: ToolOutput
    reason: str
    def __init__(self, decision: _Optional[_Union[Decision, str]] = ..., reason: _Optional[str] = ..., output: _Optional[_Union[ToolOutput, _Mapping]] = ..., events: _Optional[_Iterable[_Union[_events_pb2.HookEvent, _Mapping]]] = ...) -> None: ...

class BeforeModelRequest(_message.Message):
    __slots__ = ["messages", "run", "step", "tool_names"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAMES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_transcript_pb2.Message]
    run: RunInfo
    step: int
    tool_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, run: _Optional[_Union[RunInfo, _Mapping]] = ..., step: _Optional[int] = ..., messages: _Optional[_Iterable[_Union[_transcript_pb2.Message, _Mapping]]] = ..., tool_names: _Optional[_Iterable[str]] = ...) -> None: ...

class BeforeModelResponse(_message.Message):
    __slots__ = ["append_messages", "decision", "events", "reason", "system_prompt"]
    APPEND_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    append_messages: _containers.RepeatedCompositeFieldContainer[_transcript_pb2.Message]
    decision: Decision
    events: _containers.RepeatedCompositeFieldContainer[_events_pb2.HookEvent]
    reason: str
    system_prompt: str
    def __init__(self, decision: _Optional[_Union[Decision, str]] = ..., reason: _Optional[str] = ..., system_prompt: _Optional[str] = ..., append_messages: _Optional[_Iterable[_Union[_transcript_pb2.Message, _Mapping]]] = ..., events: _Optional[_Iterable[_Union[_events_pb2.HookEvent, _Mapping]]] = ...) -> None: ...

class BeforeRunRequest(_message.Message):
    __slots__ = ["run"]
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: RunInfo
    def __init__(self, run: _Optional[_Union[RunInfo, _Mapping]] = ...) -> None: ...

class BeforeRunResponse(_message.Message):
    __slots__ = ["decision", "events", "reason"]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    decision: Decision
    events: _containers.RepeatedCompositeFieldContainer[_events_pb2.HookEvent]
    reason: str
    def __init__(self, decision: _Optional[_Union[Decision, str]] = ..., reason: _Optional[str] = ..., events: _Optional[_Iterable[_Union[_events_pb2.HookEvent, _Mapping]]] = ...) -> None: ...

class BeforeToolRequest(_message.Message):
    __slots__ = ["arguments_json", "executor", "run", "tool_call_id", "tool_name"]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    arguments_json: str
    executor: _transcript_pb2.Executor
    run: RunInfo
    tool_call_id: str
    tool_name: str
    def __init__(self, run: _Optional[_Union[RunInfo, _Mapping]] = ..., tool_call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., executor: _Optional[_Union[_transcript_pb2.Executor, str]] = ...) -> None: ...

class BeforeToolResponse(_message.Message):
    __slots__ = ["answer", "arguments_json", "decision", "events", "reason", "require_approval"]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    answer: ToolOutput
    arguments_json: str
    decision: Decision
    events: _containers.RepeatedCompositeFieldContainer[_events_pb2.HookEvent]
    reason: str
    require_approval: bool
    def __init__(self, decision: _Optional[_Union[Decision, str]] = ..., reason: _Optional[str] = ..., arguments_json: _Optional[str] = ..., require_approval: bool = ..., answer: _Optional[_Union[ToolOutput, _Mapping]] = ..., events: _Optional[_Iterable[_Union[_events_pb2.HookEvent, _Mapping]]] = ...) -> None: ...

class GuardRequest(_message.Message):
    __slots__ = ["arguments_json", "guardrail", "messages", "output", "result", "run", "stage", "text", "tool_call_id", "tool_name"]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    GUARDRAIL_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    arguments_json: str
    guardrail: str
    messages: _containers.RepeatedCompositeFieldContainer[_transcript_pb2.Message]
    output: _struct_pb2.Value
    result: ToolOutput
    run: RunInfo
    stage: GuardStage
    text: str
    tool_call_id: str
    tool_name: str
    def __init__(self, run: _Optional[_Union[RunInfo, _Mapping]] = ..., guardrail: _Optional[str] = ..., stage: _Optional[_Union[GuardStage, str]] = ..., text: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_transcript_pb2.Message, _Mapping]]] = ..., output: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., tool_call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., result: _Optional[_Union[ToolOutput, _Mapping]] = ...) -> None: ...

class GuardResponse(_message.Message):
    __slots__ = ["details", "reason", "tripped"]
    class DetailsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TRIPPED_FIELD_NUMBER: _ClassVar[int]
    details: _containers.ScalarMap[str, str]
    reason: str
    tripped: bool
    def __init__(self, tripped: bool = ..., reason: _Optional[str] = ..., details: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RunInfo(_message.Message):
    __slots__ = ["agent", "metadata", "model", "run_id", "thread_id"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    agent: str
    metadata: _struct_pb2.Struct
    model: str
    run_id: str
    thread_id: str
    def __init__(self, run_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., agent: _Optional[str] = ..., model: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ToolOutput(_message.Message):
    __slots__ = ["is_error", "json", "text"]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    is_error: bool
    json: _struct_pb2.Value
    text: str
    def __init__(self, text: _Optional[str] = ..., json: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., is_error: bool = ...) -> None: ...

class Decision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class GuardStage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
