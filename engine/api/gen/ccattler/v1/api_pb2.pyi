from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Json(_message.Message):
    __slots__ = ("json",)
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: str
    def __init__(self, json: _Optional[str] = ...) -> None: ...

class Source(_message.Message):
    __slots__ = ("path", "text")
    PATH_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    path: str
    text: str
    def __init__(self, path: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class File(_message.Message):
    __slots__ = ("source", "path", "text")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    source: str
    path: str
    text: str
    def __init__(self, source: _Optional[str] = ..., path: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class ApplyRequest(_message.Message):
    __slots__ = ("sources", "tenant", "dry_run", "files")
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedCompositeFieldContainer[Source]
    tenant: str
    dry_run: bool
    files: _containers.RepeatedCompositeFieldContainer[File]
    def __init__(self, sources: _Optional[_Iterable[_Union[Source, _Mapping]]] = ..., tenant: _Optional[str] = ..., dry_run: _Optional[bool] = ..., files: _Optional[_Iterable[_Union[File, _Mapping]]] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("kind", "name", "tenant", "sources", "files")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    tenant: str
    sources: _containers.RepeatedCompositeFieldContainer[Source]
    files: _containers.RepeatedCompositeFieldContainer[File]
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ..., tenant: _Optional[str] = ..., sources: _Optional[_Iterable[_Union[Source, _Mapping]]] = ..., files: _Optional[_Iterable[_Union[File, _Mapping]]] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("kind", "name", "tenant", "all_tenants", "tags")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ALL_TENANTS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    tenant: str
    all_tenants: bool
    tags: _containers.ScalarMap[str, str]
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ..., tenant: _Optional[str] = ..., all_tenants: _Optional[bool] = ..., tags: _Optional[_Mapping[str, str]] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("prefix", "from_revision")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    FROM_REVISION_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    from_revision: int
    def __init__(self, prefix: _Optional[str] = ..., from_revision: _Optional[int] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("kind", "key", "value_json", "revision", "events")
    KIND_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_JSON_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    kind: str
    key: str
    value_json: str
    revision: int
    events: _containers.RepeatedCompositeFieldContainer[Event]
    def __init__(self, kind: _Optional[str] = ..., key: _Optional[str] = ..., value_json: _Optional[str] = ..., revision: _Optional[int] = ..., events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ...) -> None: ...

class ExplainRequest(_message.Message):
    __slots__ = ("target", "tenant")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    target: str
    tenant: str
    def __init__(self, target: _Optional[str] = ..., tenant: _Optional[str] = ...) -> None: ...

class PolicyRequest(_message.Message):
    __slots__ = ("name", "text")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    name: str
    text: str
    def __init__(self, name: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class SecretRequest(_message.Message):
    __slots__ = ("name", "tenant", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    tenant: str
    value: bytes
    def __init__(self, name: _Optional[str] = ..., tenant: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...

class TokenRequest(_message.Message):
    __slots__ = ("ttl_seconds", "id")
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ttl_seconds: float
    id: str
    def __init__(self, ttl_seconds: _Optional[float] = ..., id: _Optional[str] = ...) -> None: ...

class UserRequest(_message.Message):
    __slots__ = ("name", "team", "groups", "ttl_seconds")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TEAM_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    team: str
    groups: _containers.RepeatedScalarFieldContainer[str]
    ttl_seconds: float
    def __init__(self, name: _Optional[str] = ..., team: _Optional[str] = ..., groups: _Optional[_Iterable[str]] = ..., ttl_seconds: _Optional[float] = ...) -> None: ...

class AuditRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: _Optional[int] = ...) -> None: ...

class Token(_message.Message):
    __slots__ = ("token", "id", "expires")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_FIELD_NUMBER: _ClassVar[int]
    token: str
    id: str
    expires: float
    def __init__(self, token: _Optional[str] = ..., id: _Optional[str] = ..., expires: _Optional[float] = ...) -> None: ...

class LogsRequest(_message.Message):
    __slots__ = ("target", "tenant", "follow", "tail", "tags", "since_seconds", "since_time", "init")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    TAIL_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SINCE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SINCE_TIME_FIELD_NUMBER: _ClassVar[int]
    INIT_FIELD_NUMBER: _ClassVar[int]
    target: str
    tenant: str
    follow: bool
    tail: int
    tags: _containers.ScalarMap[str, str]
    since_seconds: float
    since_time: float
    init: bool
    def __init__(self, target: _Optional[str] = ..., tenant: _Optional[str] = ..., follow: _Optional[bool] = ..., tail: _Optional[int] = ..., tags: _Optional[_Mapping[str, str]] = ..., since_seconds: _Optional[float] = ..., since_time: _Optional[float] = ..., init: _Optional[bool] = ...) -> None: ...

class ScaleRequest(_message.Message):
    __slots__ = ("service", "tenant", "instances", "dry_run")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    service: str
    tenant: str
    instances: int
    dry_run: bool
    def __init__(self, service: _Optional[str] = ..., tenant: _Optional[str] = ..., instances: _Optional[int] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class RolloutRequest(_message.Message):
    __slots__ = ("service", "tenant", "action", "dry_run")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    service: str
    tenant: str
    action: str
    dry_run: bool
    def __init__(self, service: _Optional[str] = ..., tenant: _Optional[str] = ..., action: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class LogChunk(_message.Message):
    __slots__ = ("instance", "data")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    instance: str
    data: bytes
    def __init__(self, instance: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class WindowSize(_message.Message):
    __slots__ = ("rows", "cols")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    COLS_FIELD_NUMBER: _ClassVar[int]
    rows: int
    cols: int
    def __init__(self, rows: _Optional[int] = ..., cols: _Optional[int] = ...) -> None: ...

class ExecInput(_message.Message):
    __slots__ = ("instance", "tenant", "command", "tty", "stdin", "stdin_closed", "resize")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    TTY_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    STDIN_CLOSED_FIELD_NUMBER: _ClassVar[int]
    RESIZE_FIELD_NUMBER: _ClassVar[int]
    instance: str
    tenant: str
    command: _containers.RepeatedScalarFieldContainer[str]
    tty: bool
    stdin: bytes
    stdin_closed: bool
    resize: WindowSize
    def __init__(self, instance: _Optional[str] = ..., tenant: _Optional[str] = ..., command: _Optional[_Iterable[str]] = ..., tty: _Optional[bool] = ..., stdin: _Optional[bytes] = ..., stdin_closed: _Optional[bool] = ..., resize: _Optional[_Union[WindowSize, _Mapping]] = ...) -> None: ...

class ExecOutput(_message.Message):
    __slots__ = ("stdout", "stderr", "exited", "exit_code")
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    EXITED_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    stdout: bytes
    stderr: bytes
    exited: bool
    exit_code: int
    def __init__(self, stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., exited: _Optional[bool] = ..., exit_code: _Optional[int] = ...) -> None: ...

class MetricRequest(_message.Message):
    __slots__ = ("service", "tenant", "name", "value")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    service: str
    tenant: str
    name: str
    value: float
    def __init__(self, service: _Optional[str] = ..., tenant: _Optional[str] = ..., name: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...

class NodeIntentRequest(_message.Message):
    __slots__ = ("node", "intent")
    NODE_FIELD_NUMBER: _ClassVar[int]
    INTENT_FIELD_NUMBER: _ClassVar[int]
    node: str
    intent: str
    def __init__(self, node: _Optional[str] = ..., intent: _Optional[str] = ...) -> None: ...

class JoinRequest(_message.Message):
    __slots__ = ("token", "node", "csr")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    CSR_FIELD_NUMBER: _ClassVar[int]
    token: str
    node: str
    csr: bytes
    def __init__(self, token: _Optional[str] = ..., node: _Optional[str] = ..., csr: _Optional[bytes] = ...) -> None: ...

class Certificate(_message.Message):
    __slots__ = ("cert", "ca", "expires")
    CERT_FIELD_NUMBER: _ClassVar[int]
    CA_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_FIELD_NUMBER: _ClassVar[int]
    cert: bytes
    ca: bytes
    expires: float
    def __init__(self, cert: _Optional[bytes] = ..., ca: _Optional[bytes] = ..., expires: _Optional[float] = ...) -> None: ...

class CsrRequest(_message.Message):
    __slots__ = ("csr",)
    CSR_FIELD_NUMBER: _ClassVar[int]
    csr: bytes
    def __init__(self, csr: _Optional[bytes] = ...) -> None: ...

class IdentityRequest(_message.Message):
    __slots__ = ("instance", "csr")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    CSR_FIELD_NUMBER: _ClassVar[int]
    instance: str
    csr: bytes
    def __init__(self, instance: _Optional[str] = ..., csr: _Optional[bytes] = ...) -> None: ...

class WorkloadIdentity(_message.Message):
    __slots__ = ("cert", "bundle", "spiffe_id", "expires")
    CERT_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_FIELD_NUMBER: _ClassVar[int]
    SPIFFE_ID_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_FIELD_NUMBER: _ClassVar[int]
    cert: bytes
    bundle: bytes
    spiffe_id: str
    expires: float
    def __init__(self, cert: _Optional[bytes] = ..., bundle: _Optional[bytes] = ..., spiffe_id: _Optional[str] = ..., expires: _Optional[float] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("node_json", "ttl_seconds")
    NODE_JSON_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    node_json: str
    ttl_seconds: float
    def __init__(self, node_json: _Optional[str] = ..., ttl_seconds: _Optional[float] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("lease", "ttl_seconds")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    lease: int
    ttl_seconds: float
    def __init__(self, lease: _Optional[int] = ..., ttl_seconds: _Optional[float] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: int
    def __init__(self, lease: _Optional[int] = ...) -> None: ...

class HeartbeatReply(_message.Message):
    __slots__ = ("revision",)
    REVISION_FIELD_NUMBER: _ClassVar[int]
    revision: int
    def __init__(self, revision: _Optional[int] = ...) -> None: ...

class Observation(_message.Message):
    __slots__ = ("key", "value_json")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_JSON_FIELD_NUMBER: _ClassVar[int]
    key: str
    value_json: str
    def __init__(self, key: _Optional[str] = ..., value_json: _Optional[str] = ...) -> None: ...

class ReportRequest(_message.Message):
    __slots__ = ("observations",)
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    observations: _containers.RepeatedCompositeFieldContainer[Observation]
    def __init__(self, observations: _Optional[_Iterable[_Union[Observation, _Mapping]]] = ...) -> None: ...

class SecretsRequest(_message.Message):
    __slots__ = ("instance", "instances")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    instance: str
    instances: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, instance: _Optional[str] = ..., instances: _Optional[_Iterable[str]] = ...) -> None: ...

class SecretValue(_message.Message):
    __slots__ = ("name", "value", "mount")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    MOUNT_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: bytes
    mount: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[bytes] = ..., mount: _Optional[str] = ...) -> None: ...

class InstanceSecrets(_message.Message):
    __slots__ = ("instance", "secrets", "error")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    SECRETS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    instance: str
    secrets: _containers.RepeatedCompositeFieldContainer[SecretValue]
    error: str
    def __init__(self, instance: _Optional[str] = ..., secrets: _Optional[_Iterable[_Union[SecretValue, _Mapping]]] = ..., error: _Optional[str] = ...) -> None: ...

class Secrets(_message.Message):
    __slots__ = ("secrets", "instances")
    SECRETS_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    secrets: _containers.RepeatedCompositeFieldContainer[SecretValue]
    instances: _containers.RepeatedCompositeFieldContainer[InstanceSecrets]
    def __init__(self, secrets: _Optional[_Iterable[_Union[SecretValue, _Mapping]]] = ..., instances: _Optional[_Iterable[_Union[InstanceSecrets, _Mapping]]] = ...) -> None: ...

class TunnelUp(_message.Message):
    __slots__ = ("session", "fd", "data", "closed", "exit_code", "error")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    FD_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    session: int
    fd: int
    data: bytes
    closed: bool
    exit_code: int
    error: str
    def __init__(self, session: _Optional[int] = ..., fd: _Optional[int] = ..., data: _Optional[bytes] = ..., closed: _Optional[bool] = ..., exit_code: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class TunnelDown(_message.Message):
    __slots__ = ("session", "open", "request_json", "stdin", "stdin_closed", "cancel", "resize")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    REQUEST_JSON_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    STDIN_CLOSED_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    RESIZE_FIELD_NUMBER: _ClassVar[int]
    session: int
    open: str
    request_json: str
    stdin: bytes
    stdin_closed: bool
    cancel: bool
    resize: WindowSize
    def __init__(self, session: _Optional[int] = ..., open: _Optional[str] = ..., request_json: _Optional[str] = ..., stdin: _Optional[bytes] = ..., stdin_closed: _Optional[bool] = ..., cancel: _Optional[bool] = ..., resize: _Optional[_Union[WindowSize, _Mapping]] = ...) -> None: ...

class ExplainNetworkRequest(_message.Message):
    __slots__ = ("kind", "source", "destination", "tenant")
    KIND_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    kind: str
    source: str
    destination: str
    tenant: str
    def __init__(self, kind: _Optional[str] = ..., source: _Optional[str] = ..., destination: _Optional[str] = ..., tenant: _Optional[str] = ...) -> None: ...
