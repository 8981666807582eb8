from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Event(_message.Message):
    __slots__ = ("event_type", "tags", "data", "uuid", "metadata")
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    event_type: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    data: bytes
    uuid: str
    metadata: _containers.RepeatedCompositeFieldContainer[MetadataEntry]
    def __init__(self, event_type: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., data: _Optional[bytes] = ..., uuid: _Optional[str] = ..., metadata: _Optional[_Iterable[_Union[MetadataEntry, _Mapping]]] = ...) -> None: ...

class MetadataEntry(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class TrackingInfo(_message.Message):
    __slots__ = ("source", "position")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    source: str
    position: int
    def __init__(self, source: _Optional[str] = ..., position: _Optional[int] = ...) -> None: ...

class SequencedEvent(_message.Message):
    __slots__ = ("position", "event", "tracking_info")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    TRACKING_INFO_FIELD_NUMBER: _ClassVar[int]
    position: int
    event: Event
    tracking_info: TrackingInfo
    def __init__(self, position: _Optional[int] = ..., event: _Optional[_Union[Event, _Mapping]] = ..., tracking_info: _Optional[_Union[TrackingInfo, _Mapping]] = ...) -> None: ...

class QueryItem(_message.Message):
    __slots__ = ("types", "tags")
    TYPES_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    types: _containers.RepeatedScalarFieldContainer[str]
    tags: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, types: _Optional[_Iterable[str]] = ..., tags: _Optional[_Iterable[str]] = ...) -> None: ...

class Query(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[QueryItem]
    def __init__(self, items: _Optional[_Iterable[_Union[QueryItem, _Mapping]]] = ...) -> None: ...

class AppendCondition(_message.Message):
    __slots__ = ("fail_if_events_match", "after")
    FAIL_IF_EVENTS_MATCH_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    fail_if_events_match: Query
    after: int
    def __init__(self, fail_if_events_match: _Optional[_Union[Query, _Mapping]] = ..., after: _Optional[int] = ...) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ("query", "start", "backwards", "limit", "subscribe", "batch_size")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    BACKWARDS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    query: Query
    start: int
    backwards: bool
    limit: int
    subscribe: bool
    batch_size: int
    def __init__(self, query: _Optional[_Union[Query, _Mapping]] = ..., start: _Optional[int] = ..., backwards: _Optional[bool] = ..., limit: _Optional[int] = ..., subscribe: _Optional[bool] = ..., batch_size: _Optional[int] = ...) -> None: ...

class ReadResponse(_message.Message):
    __slots__ = ("events", "head")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[SequencedEvent]
    head: int
    def __init__(self, events: _Optional[_Iterable[_Union[SequencedEvent, _Mapping]]] = ..., head: _Optional[int] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("query", "after", "batch_size")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    query: Query
    after: int
    batch_size: int
    def __init__(self, query: _Optional[_Union[Query, _Mapping]] = ..., after: _Optional[int] = ..., batch_size: _Optional[int] = ...) -> None: ...

class SubscribeResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[SequencedEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[SequencedEvent, _Mapping]]] = ...) -> None: ...

class AppendRequest(_message.Message):
    __slots__ = ("events", "condition", "tracking_info")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    TRACKING_INFO_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    condition: AppendCondition
    tracking_info: TrackingInfo
    def __init__(self, events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., condition: _Optional[_Union[AppendCondition, _Mapping]] = ..., tracking_info: _Optional[_Union[TrackingInfo, _Mapping]] = ...) -> None: ...

class AppendResponse(_message.Message):
    __slots__ = ("position",)
    POSITION_FIELD_NUMBER: _ClassVar[int]
    position: int
    def __init__(self, position: _Optional[int] = ...) -> None: ...

class HeadRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HeadResponse(_message.Message):
    __slots__ = ("position",)
    POSITION_FIELD_NUMBER: _ClassVar[int]
    position: int
    def __init__(self, position: _Optional[int] = ...) -> None: ...

class TrackingRequest(_message.Message):
    __slots__ = ("source",)
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    source: str
    def __init__(self, source: _Optional[str] = ...) -> None: ...

class TrackingResponse(_message.Message):
    __slots__ = ("position",)
    POSITION_FIELD_NUMBER: _ClassVar[int]
    position: int
    def __init__(self, position: _Optional[int] = ...) -> None: ...

class ErrorResponse(_message.Message):
    __slots__ = ("message", "error_type")
    class ErrorType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        IO: _ClassVar[ErrorResponse.ErrorType]
        SERIALIZATION: _ClassVar[ErrorResponse.ErrorType]
        INTEGRITY: _ClassVar[ErrorResponse.ErrorType]
        CORRUPTION: _ClassVar[ErrorResponse.ErrorType]
        INTERNAL: _ClassVar[ErrorResponse.ErrorType]
        AUTHENTICATION: _ClassVar[ErrorResponse.ErrorType]
        INVALID_ARGUMENT: _ClassVar[ErrorResponse.ErrorType]
    IO: ErrorResponse.ErrorType
    SERIALIZATION: ErrorResponse.ErrorType
    INTEGRITY: ErrorResponse.ErrorType
    CORRUPTION: ErrorResponse.ErrorType
    INTERNAL: ErrorResponse.ErrorType
    AUTHENTICATION: ErrorResponse.ErrorType
    INVALID_ARGUMENT: ErrorResponse.ErrorType
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    message: str
    error_type: ErrorResponse.ErrorType
    def __init__(self, message: _Optional[str] = ..., error_type: _Optional[_Union[ErrorResponse.ErrorType, str]] = ...) -> None: ...
