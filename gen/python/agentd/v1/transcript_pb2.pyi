from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
EXECUTOR_CLIENT: Executor
EXECUTOR_SERVER: Executor
EXECUTOR_UNSPECIFIED: Executor
ROLE_ASSISTANT: Role
ROLE_SYSTEM: Role
ROLE_TOOL: Role
ROLE_UNSPECIFIED: Role
ROLE_USER: Role

class ClientTool(_message.Message):
    __slots__ = ["completes_run", "requires_approval", "spec", "timeout"]
    COMPLETES_RUN_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    completes_run: bool
    requires_approval: bool
    spec: ToolSpec
    timeout: _duration_pb2.Duration
    def __init__(self, spec: _Optional[_Union[ToolSpec, _Mapping]] = ..., timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., requires_approval: bool = ..., completes_run: bool = ...) -> None: ...

class MediaPart(_message.Message):
    __slots__ = ["data", "mime_type", "name", "uri"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    mime_type: str
    name: str
    uri: str
    def __init__(self, mime_type: _Optional[str] = ..., data: _Optional[bytes] = ..., uri: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ["id", "partial", "parts", "role"]
    ID_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    id: str
    partial: bool
    parts: _containers.RepeatedCompositeFieldContainer[Part]
    role: Role
    def __init__(self, id: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., parts: _Optional[_Iterable[_Union[Part, _Mapping]]] = ..., partial: bool = ...) -> None: ...

class Part(_message.Message):
    __slots__ = ["id", "media", "reasoning", "text", "tool_call", "tool_result"]
    ID_FIELD_NUMBER: _ClassVar[int]
    MEDIA_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    id: str
    media: MediaPart
    reasoning: ReasoningPart
    text: str
    tool_call: ToolCallPart
    tool_result: ToolResultPart
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ..., reasoning: _Optional[_Union[ReasoningPart, _Mapping]] = ..., tool_call: _Optional[_Union[ToolCallPart, _Mapping]] = ..., tool_result: _Optional[_Union[ToolResultPart, _Mapping]] = ..., media: _Optional[_Union[MediaPart, _Mapping]] = ...) -> None: ...

class ReasoningPart(_message.Message):
    __slots__ = ["state", "text"]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    state: bytes
    text: str
    def __init__(self, text: _Optional[str] = ..., state: _Optional[bytes] = ...) -> None: ...

class ToolCallPart(_message.Message):
    __slots__ = ["arguments_json", "executor", "id", "name"]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    arguments_json: str
    executor: Executor
    id: str
    name: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., executor: _Optional[_Union[Executor, str]] = ...) -> None: ...

class ToolResultPart(_message.Message):
    __slots__ = ["is_error", "json", "media", "name", "text", "tool_call_id"]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    MEDIA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    is_error: bool
    json: _struct_pb2.Value
    media: _containers.RepeatedCompositeFieldContainer[MediaPart]
    name: str
    text: str
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., name: _Optional[str] = ..., text: _Optional[str] = ..., json: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., is_error: bool = ..., media: _Optional[_Iterable[_Union[MediaPart, _Mapping]]] = ...) -> None: ...

class ToolSpec(_message.Message):
    __slots__ = ["description", "name", "parameters"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    description: str
    name: str
    parameters: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ["cache_creation_input_tokens", "cache_read_input_tokens", "input_tokens", "model_calls", "output_tokens", "reasoning_tokens", "tool_calls"]
    CACHE_CREATION_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_READ_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALLS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    input_tokens: int
    model_calls: int
    output_tokens: int
    reasoning_tokens: int
    tool_calls: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., reasoning_tokens: _Optional[int] = ..., cache_read_input_tokens: _Optional[int] = ..., cache_creation_input_tokens: _Optional[int] = ..., model_calls: _Optional[int] = ..., tool_calls: _Optional[int] = ...) -> None: ...

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Executor(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
