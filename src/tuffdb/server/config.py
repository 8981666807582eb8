"""``tuffdb serve`` configuration: :class:`ServeConfig` and where its values come from.

Precedence, highest first: command-line flags, ``TUFFDB_*`` environment variables,
the TOML file named by ``--config`` (or ``TUFFDB_CONFIG``), the defaults below.
Every option has the three spellings ``--interval-ms``, ``TUFFDB_INTERVAL_MS`` and
``interval_ms`` (``interval-ms`` is accepted in TOML too). TOML tables ``[resp]``,
``[grpc]`` and ``[http]`` are passed through untouched in :attr:`ServeConfig.extra`.

Relative paths from flags and the environment are relative to the current
directory; relative paths in a TOML file are relative to that file's directory, so
a config file can be moved together with its data. An empty environment variable
counts as unset.

The encryption key is never a config value: ``encryption_key_file`` names a file,
or ``TUFFDB_ENCRYPTION_KEY`` holds the key itself (hex or base64 of 32 bytes);
faces call :func:`encryption_key` to get the bytes.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import dataclasses
import hashlib
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuffdb.errors import Error

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

DURABILITY_MODES = ("always", "interval", "none")
LOG_LEVELS = ("debug", "info", "warning", "error")
FACE_SECTIONS = ("resp", "grpc", "http")
KEY_SIZE = 32
ENV_PREFIX = "TUFFDB_"
ENV_KEY = "TUFFDB_ENCRYPTION_KEY"
REDACTED = "***"
_SECRET_NAME = re.compile(r"pass|secret|token|api_key|apikey|private", re.IGNORECASE)


class ConfigError(Error, ValueError):
    """A configuration value is invalid; the message names the option and its source."""


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """Everything ``tuffdb serve`` and its faces are configured with (see contracts.md)."""

    data_dir: Path = Path("tuffdb-data")
    host: str = "127.0.0.1"
    admin_port: int = 9090
    resp_port: int = 6379
    grpc_port: int = 50051
    http_port: int = 8080
    durability: str = "interval"
    interval_ms: int = 200
    cache_mb: int = 512
    encryption_key_file: Path | None = None
    requirepass: str | None = None
    maxclients: int = 10000
    api_key: str | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    log_level: str = "info"
    archive: str | None = None
    archive_interval: float = 1.0
    archive_base_interval: float = 3600.0
    archive_retention: float = 7 * 86400.0
    archive_lag_degraded: float = 30.0
    local_bytes: int | None = None
    tier_cache_mb: int = 256
    cluster: str | None = None
    etcd: str | None = None
    node_id: str | None = None
    advertise: str | None = None
    replication_port: int = 7070
    sync_replicas: int | None = None
    lease_ttl: int = 3
    confirm_timeout_ms: int = 2000
    replication_buffer_mb: int = 256
    cluster_secret: str | None = None
    protected_mode: bool = True
    extra: dict[str, dict[str, Any]] = field(default_factory=dict, hash=False)


def _yes_no(text: str) -> bool:
    value = text.strip().lower()
    if value in ("yes", "true", "on", "1"):
        return True
    if value in ("no", "false", "off", "0"):
        return False
    raise ValueError("must be yes or no")


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise ValueError("must be a port number 0..65535 (0 disables the listener)")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError("must be a positive integer")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError("must be a positive number of seconds")
    return value


def _bytes(text: str) -> int:
    """A size: bytes, or with a K, M, G or T suffix (powers of 1024)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    text = text.strip().upper().removesuffix("B")
    scale = units.get(text[-1:], 1)
    value = int(float(text[:-1] if scale > 1 else text) * scale)
    if value < 0:
        raise ValueError("must be a size in bytes, e.g. 10G, 500M or 1048576")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError("must be a non-negative integer")
    return value


def _name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}", text):
        raise ValueError("must be 1-63 letters, digits, '.', '_' or '-', starting with a "
                         "letter or digit")
    return text


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return text

    return parse


# name -> (parser of the text form, help); the order is the order of --help.
_METAVARS = {"archive": "URL", "local_bytes": "SIZE", "durability": "MODE",
             "requirepass": "PASSWORD", "maxclients": "N",
             "log_level": "LEVEL", "api_key": "KEY", "data_dir": "DIR", "cluster": "NAME",
             "etcd": "URLS", "node_id": "ID", "advertise": "HOST", "sync_replicas": "N",
             "lease_ttl": "SECONDS", "cluster_secret": "SECRET", "protected_mode": "yes|no"}
_OPTIONS: dict[str, tuple[Callable[[str], Any], str]] = {
    "data_dir": (Path, "data directory; each face keeps its store in a subdirectory"),
    "host": (str, "address every listener binds to"),
    "admin_port": (_port, "HTTP admin port: GET /health, GET /metrics"),
    "resp_port": (_port, "Redis protocol (RESP) port"),
    "grpc_port": (_port, "UmaDB gRPC (DCB events) port"),
    "http_port": (_port, "ekoDB HTTP (documents) port"),
    "durability": (_choice(*DURABILITY_MODES), "when writes reach disk: always|interval|none"),
    "interval_ms": (_positive, "fsync interval for durability=interval"),
    "cache_mb": (_positive, "block cache of the KV store behind the RESP face, MiB"),
    "encryption_key_file": (Path, f"file with the 32-byte key (or set {ENV_KEY})"),
    "requirepass": (str, "password RESP clients must AUTH with"),
    "maxclients": (_positive, "maximum concurrent clients per face"),
    "api_key": (str, "API key HTTP clients must present"),
    "tls_cert": (Path, "TLS certificate (PEM); needs --tls-key"),
    "tls_key": (Path, "TLS private key (PEM); needs --tls-cert"),
    "log_level": (_choice(*LOG_LEVELS), "lowest level logged: debug|info|warning|error"),
    "archive": (str, "archive continuously to a directory or s3://bucket/prefix"),
    "archive_interval": (_seconds, "ship log tails to the archive at least this often, s"),
    "archive_base_interval": (_seconds, "take a base backup into the archive this often, s"),
    "archive_retention": (_seconds, "keep restore points for this long, s"),
    "archive_lag_degraded": (_seconds, "/health says degraded past this archive lag, s"),
    "local_bytes": (_bytes, "tiering: keep at most this much of the KV stores' archived cold "
                            "segments on local disk (e.g. 20G; needs --archive)"),
    "tier_cache_mb": (_positive, "tiering: local cache of archived segments' bytes, MiB"),
    "cluster": (_name, "join the replicated cluster of this name (needs --etcd, --node-id)"),
    "etcd": (str, "etcd client URLs, comma-separated, e.g. http://10.0.0.1:2379"),
    "node_id": (_name, "this node's name in the cluster (unique, stable across restarts)"),
    "advertise": (str, "address other nodes and clients reach this node at (default: --host)"),
    "replication_port": (_port, "port followers fetch the leader's log from"),
    "sync_replicas": (_count, "followers that must fsync a durable write before it is "
                              "acknowledged (0: asynchronous; default 1 once the cluster has "
                              "followers)"),
    "lease_ttl": (_positive, "seconds the leader's etcd lease lasts without renewal"),
    "confirm_timeout_ms": (_positive, "how long a durable write waits for its followers "
                                      "before it fails (NOREPLICAS)"),
    "replication_buffer_mb": (_positive, "recent rounds the leader keeps for followers that "
                                         "fall behind; one further behind takes a snapshot"),
    "cluster_secret": (str, "secret every node of the cluster knows: the leader's replication "
                            "port admits only nodes that prove it (default: derived from the "
                            "encryption key, requirepass and api-key, when any is set)"),
    "protected_mode": (_yes_no, "yes: a face with no secret set (RESP without requirepass, "
                                "gRPC without api-key, POST /backup without either, the "
                                "replication port without a cluster secret) accepts clients "
                                "from this host only, as Redis's protected mode; no: from "
                                "anywhere"),
}
_SECRETS = frozenset({"requirepass", "api_key", "cluster_secret"})
_DEFAULTS = ServeConfig()


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--config`` and one flag per option; absent flags leave no attribute."""
    parser.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                        help=f"TOML file with defaults for these options (env {ENV_PREFIX}CONFIG)")
    for name, (_, help_) in _OPTIONS.items():
        default = getattr(_DEFAULTS, name)
        shown = ("" if default is None else
                 f"; default {('yes' if default else 'no') if isinstance(default, bool) else default}")
        metavar = _METAVARS.get(name, name.split("_")[-1].upper())
        parser.add_argument(
            "--" + name.replace("_", "-"), dest=name, metavar=metavar,
            default=argparse.SUPPRESS, help=f"{help_} (env {ENV_PREFIX}{name.upper()}{shown})",
        )


def _coerce(name: str, value: object, source: str) -> Any:
    parse = _OPTIONS[name][0]
    if isinstance(value, bool) and parse is _yes_no:  # (TOML: protected_mode = false)
        return value
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(f"{source}: must be a string or integer, not {value!r}")
    try:
        return parse(str(value))
    except ValueError as exc:
        detail = str(exc) if "must" in str(exc) else "must be an integer"
        raise ConfigError(f"{source}: {value!r} {detail}") from None


def _read_toml(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    source = f"config file {path}"
    try:
        with path.open("rb") as f:
            doc = tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    values: dict[str, Any] = {}
    extra: dict[str, dict[str, Any]] = {}
    for key, value in doc.items():
        name = key.replace("-", "_")
        if key in FACE_SECTIONS and isinstance(value, dict):
            extra[key] = value
        elif name in _OPTIONS:
            values[name] = _coerce(name, value, f"{source}: {key}")
            if isinstance(values[name], Path) and not values[name].is_absolute():
                values[name] = path.parent / values[name]
        else:
            known = ", ".join([*_OPTIONS, *(f"[{s}]" for s in FACE_SECTIONS)])
            raise ConfigError(f"{source}: unknown key {key!r}; known keys: {known}")
    return values, extra


def load(flags: Mapping[str, Any], env: Mapping[str, str] | None = None) -> ServeConfig:
    """Build the effective :class:`ServeConfig` from flags, environment and TOML file.

    ``flags`` maps option names (``resp_port``) to the flag's text, plus ``config``;
    options not given on the command line are simply absent.

    :raises ConfigError: when a value does not parse, the TOML file is unreadable or
        has unknown keys, two listeners share a port, or the encryption key is bad.
    """
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    extra: dict[str, dict[str, Any]] = {}
    config_file = flags.get("config") or env.get(ENV_PREFIX + "CONFIG")
    if config_file:
        values, extra = _read_toml(Path(config_file))
    env_values = {n: _coerce(n, env[ENV_PREFIX + n.upper()], f"env {ENV_PREFIX}{n.upper()}")
                  for n in _OPTIONS if env.get(ENV_PREFIX + n.upper())}
    if env.get(ENV_KEY):
        # The key itself in the environment outranks a key file named by TOML.
        values.pop("encryption_key_file", None)
    values.update(env_values)
    values.update({n: _coerce(n, v, f"--{n.replace('_', '-')}")
                   for n, v in flags.items() if n in _OPTIONS})
    for name, value in values.items():
        if isinstance(value, Path):
            values[name] = value.absolute()
    values.setdefault("data_dir", _DEFAULTS.data_dir.absolute())
    config = dataclasses.replace(_DEFAULTS, extra=extra, **values)
    _validate(config, env)
    return config


def _validate(config: ServeConfig, env: Mapping[str, str]) -> None:
    if (config.tls_cert is None) != (config.tls_key is None):
        raise ConfigError("tls_cert and tls_key must be given together")
    if config.cluster is not None:
        if not config.etcd or not config.node_id:
            raise ConfigError("cluster needs etcd (--etcd URL[,URL...]) and node_id (--node-id)")
        if not config.replication_port:
            raise ConfigError("cluster needs a replication_port other than 0")
        if config.advertise is None and config.host in ("0.0.0.0", "::", ""):  # noqa: S104
            raise ConfigError("with host bound to every address, give advertise: the "
                              "address other nodes reach this one at")
    if config.local_bytes is not None:
        if not config.archive:
            raise ConfigError("local_bytes (tiering) needs archive: segments are dropped "
                              "locally only once they are archived")
        if config.cluster is not None:
            raise ConfigError("local_bytes (tiering) is not supported in a cluster: a "
                              "follower's snapshot would download every tiered segment")
    seen: dict[int, str] = {}
    ports = ["admin_port", "resp_port", "grpc_port", "http_port"]
    if config.cluster is not None:
        ports.append("replication_port")
    for name in ports:
        port = getattr(config, name)
        if port and port in seen:
            raise ConfigError(f"{name} and {seen[port]} are both {port}; give each its own port")
        seen[port] = name
    encryption_key(config, env)


def parse_key(raw: bytes, source: str) -> bytes:
    """Decode a 32-byte key given raw (files only), as hex, or as base64.

    :raises ConfigError: when ``raw`` is none of those.
    """
    if len(raw) == KEY_SIZE:
        return raw
    text = raw.strip()
    for decode in (binascii.unhexlify, base64.b64decode, base64.urlsafe_b64decode):
        try:
            key = decode(text)
        except (binascii.Error, ValueError):
            continue
        if len(key) == KEY_SIZE:
            return key
    raise ConfigError(f"{source}: the encryption key must be {KEY_SIZE} bytes, "
                      "given raw, as 64 hex digits or as base64")


def encryption_key(config: ServeConfig, env: Mapping[str, str] | None = None) -> bytes | None:
    """Return the configured 32-byte encryption key, or None when encryption is off.

    :raises ConfigError: when the key file cannot be read or the key is malformed.
    """
    env = os.environ if env is None else env
    if config.encryption_key_file is not None:
        try:
            raw = config.encryption_key_file.read_bytes()
        except OSError as exc:
            raise ConfigError(f"encryption_key_file {config.encryption_key_file}: "
                              f"cannot read: {exc.strerror}") from None
        return parse_key(raw, f"encryption_key_file {config.encryption_key_file}")
    if env.get(ENV_KEY):
        return parse_key(env[ENV_KEY].encode(), f"env {ENV_KEY}")
    return None


def cluster_secret(config: ServeConfig, env: Mapping[str, str] | None = None) -> bytes | None:
    """The secret a cluster's nodes prove to each other on the replication port: derived
    from ``cluster_secret`` if set, else from every other secret the node is configured
    with (the encryption key, ``requirepass``, ``api_key``), so nodes configured alike
    need no new setting; None when the node has none (the port then admits anyone).

    :raises ConfigError: as :func:`encryption_key`.
    """
    if config.cluster_secret:
        parts = [b"cluster_secret=" + config.cluster_secret.encode()]
    else:
        key = encryption_key(config, env)
        parts = [name.encode() + b"=" + value for name, value in (
            ("encryption_key", key),
            ("requirepass", config.requirepass.encode() if config.requirepass else None),
            ("api_key", config.api_key.encode() if config.api_key else None)) if value]
    if not parts:
        return None
    return hashlib.sha256(b"tuffdb-cluster-secret\0" + b"\0".join(parts)).digest()


def _redact_section(section: Mapping[str, Any]) -> dict[str, Any]:
    return {k: REDACTED if _SECRET_NAME.search(k) and v else v for k, v in section.items()}


def redacted(config: ServeConfig) -> dict[str, Any]:
    """The configuration as a JSON-able dict with passwords and API keys masked."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name in _SECRETS and value is not None:
            value = REDACTED
        elif f.name == "extra":
            value = {name: _redact_section(section) for name, section in value.items()}
        elif isinstance(value, Path):
            value = str(value)
        out[f.name] = value
    return out
