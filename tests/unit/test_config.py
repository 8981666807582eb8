"""``tuffdb serve`` configuration: precedence flag > env > TOML > default, and validation.

Operators debug a misconfigured server by reading the effective configuration, so
each source must win exactly where documented and every bad value must name its
option and where it came from.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
from typing import TYPE_CHECKING, Any

import pytest

from tuffdb.server.config import (
    REDACTED,
    ConfigError,
    ServeConfig,
    add_serve_arguments,
    cluster_secret,
    encryption_key,
    load,
    redacted,
)

if TYPE_CHECKING:
    from pathlib import Path

KEY = bytes(range(32))


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tuffdb.toml"
    path.write_text(text)
    return path


def test_serve_config_has_exactly_the_contract_fields() -> None:
    names = [f.name for f in dataclasses.fields(ServeConfig)]
    assert names == [
        "data_dir", "host", "admin_port", "resp_port", "grpc_port", "http_port",
        "durability", "interval_ms", "cache_mb", "encryption_key_file", "requirepass", "maxclients",
        "api_key", "tls_cert", "tls_key", "log_level", "archive", "archive_interval",
        "archive_base_interval", "archive_retention", "archive_lag_degraded", "local_bytes",
        "tier_cache_mb", "cluster", "etcd",
        "node_id", "advertise", "replication_port", "sync_replicas", "lease_ttl",
        "confirm_timeout_ms", "replication_buffer_mb", "cluster_secret", "protected_mode", "extra",
    ]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ServeConfig().host = "0.0.0.0"  # type: ignore[misc]


def test_defaults_apply_when_nothing_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = load({}, env={})
    assert config.data_dir == tmp_path / "tuffdb-data"
    assert (config.host, config.admin_port, config.resp_port) == ("127.0.0.1", 9090, 6379)
    assert (config.grpc_port, config.http_port) == (50051, 8080)
    assert (config.durability, config.interval_ms, config.log_level) == ("interval", 200, "info")
    assert config.requirepass is None
    assert config.protected_mode is True
    assert config.extra == {}


def test_flag_beats_env_beats_toml_beats_default(tmp_path: Path) -> None:
    toml = write_toml(tmp_path, "resp_port = 1111\ngrpc_port = 2222\nhttp_port = 3333\n")
    env = {"TUFFDB_RESP_PORT": "4444", "TUFFDB_GRPC_PORT": "5555"}
    config = load({"config": str(toml), "resp_port": "6666"}, env=env)
    assert config.resp_port == 6666  # flag
    assert config.grpc_port == 5555  # env over TOML
    assert config.http_port == 3333  # TOML over default
    assert config.admin_port == 9090  # default


def test_config_file_can_be_named_by_env(tmp_path: Path) -> None:
    toml = write_toml(tmp_path, 'durability = "always"\n')
    assert load({}, env={"TUFFDB_CONFIG": str(toml)}).durability == "always"


def test_empty_env_var_counts_as_unset(tmp_path: Path) -> None:
    toml = write_toml(tmp_path, 'requirepass = "from-toml"\n')
    config = load({"config": str(toml)}, env={"TUFFDB_REQUIREPASS": ""})
    assert config.requirepass == "from-toml"


def test_toml_face_sections_go_to_extra_untouched(tmp_path: Path) -> None:
    toml = write_toml(tmp_path, "[resp]\ndatabases = 16\n[http]\ncors = ['a', 'b']\n")
    config = load({"config": str(toml)}, env={})
    assert config.extra == {"resp": {"databases": 16}, "http": {"cors": ["a", "b"]}}


def test_toml_accepts_hyphenated_keys(tmp_path: Path) -> None:
    toml = write_toml(tmp_path, "interval-ms = 50\nlog-level = 'debug'\n")
    config = load({"config": str(toml)}, env={})
    assert (config.interval_ms, config.log_level) == (50, "debug")


def test_relative_paths_in_toml_are_relative_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf_dir = tmp_path / "etc"
    conf_dir.mkdir()
    toml = write_toml(conf_dir, 'data_dir = "data"\n')
    monkeypatch.chdir(tmp_path)
    assert load({"config": str(toml)}, env={}).data_dir == conf_dir / "data"
    assert load({"config": str(toml), "data_dir": "d2"}, env={}).data_dir == tmp_path / "d2"


@pytest.mark.parametrize(
    ("flags", "env", "toml", "fragment"),
    [
        ({"resp_port": "70000"}, {}, "", "--resp-port: '70000' must be a port number"),
        ({"admin_port": "http"}, {}, "", "--admin-port: 'http' must be an integer"),
        ({}, {"TUFFDB_DURABILITY": "maybe"}, "", "env TUFFDB_DURABILITY: 'maybe' must be one of"),
        ({}, {"TUFFDB_INTERVAL_MS": "0"}, "", "must be a positive integer"),
        ({}, {}, "log_level = 'loud'\n", "log_level: 'loud' must be one of"),
        ({}, {}, "grpc_port = true\n", "grpc_port: must be a string or integer"),
        ({}, {}, "colour = 'blue'\n", "unknown key 'colour'"),
        ({}, {}, "port = \n", "not valid TOML"),
    ],
)
def test_bad_values_name_the_option_and_source(
    tmp_path: Path, flags: dict[str, str], env: dict[str, str], toml: str, fragment: str
) -> None:
    if toml:
        flags = {**flags, "config": str(write_toml(tmp_path, toml))}
    with pytest.raises(ConfigError) as info:
        load(flags, env=env)
    assert fragment in str(info.value)


def test_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load({"config": str(tmp_path / "nope.toml")}, env={})


def test_two_listeners_on_one_port_is_an_error_but_two_disabled_is_not() -> None:
    with pytest.raises(ConfigError, match="resp_port and admin_port are both 7000"):
        load({"admin_port": "7000", "resp_port": "7000"}, env={})
    config = load({"resp_port": "0", "grpc_port": "0"}, env={})
    assert (config.resp_port, config.grpc_port) == (0, 0)


def test_tls_cert_and_key_come_together(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="together"):
        load({"tls_cert": str(tmp_path / "c.pem")}, env={})
    config = load({"tls_cert": "c.pem", "tls_key": "k.pem"}, env={})
    assert config.tls_key is not None
    assert config.tls_key.name == "k.pem"


@pytest.mark.parametrize(
    "text", [KEY.hex(), base64.b64encode(KEY).decode(), base64.urlsafe_b64encode(KEY).decode()]
)
def test_encryption_key_from_env_as_hex_or_base64(text: str) -> None:
    env = {"TUFFDB_ENCRYPTION_KEY": text}
    assert encryption_key(load({}, env=env), env) == KEY


@pytest.mark.parametrize("content", [KEY, KEY.hex().encode() + b"\n"])
def test_encryption_key_file_raw_or_hex(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "key").write_bytes(content)
    config = load({"encryption_key_file": str(tmp_path / "key")}, env={})
    assert encryption_key(config, {}) == KEY


def test_no_key_means_no_encryption() -> None:
    assert encryption_key(load({}, env={}), {}) is None


def test_cluster_secret_is_explicit_or_derived_from_the_other_secrets() -> None:
    """Nodes configured alike prove the same secret with no new setting; any difference
    in the secrets it derives from, or an explicit --cluster-secret, changes it; a node
    with no secret at all has none (its replication port admits anyone)."""
    env = {"TUFFDB_ENCRYPTION_KEY": KEY.hex()}
    assert cluster_secret(load({}, env={}), {}) is None
    derived = {
        name: cluster_secret(load(flags, env=e), e)
        for name, flags, e in (
            ("key", {}, env), ("key again", {}, env),
            ("key+pass", {"requirepass": "p"}, env), ("pass", {"requirepass": "p"}, {}),
            ("other pass", {"requirepass": "q"}, {}), ("api key", {"api_key": "p"}, {}),
            ("explicit", {"cluster_secret": "p"}, env),
            ("explicit alone", {"cluster_secret": "p"}, {}),
        )}
    assert derived["key"] == derived["key again"]
    assert derived["explicit"] == derived["explicit alone"]  # it replaces the others
    distinct = [v for k, v in derived.items() if k not in ("key again", "explicit alone")]
    assert all(isinstance(v, bytes) and len(v) == 32 for v in distinct)
    assert len(set(distinct)) == len(distinct)
    assert "cluster_secret" in str(redacted(load({"cluster_secret": "p"}, env={})))
    assert "'p'" not in str(redacted(load({"cluster_secret": "p"}, env={})))


def test_bad_or_missing_key_fails_at_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must be 32 bytes"):
        load({}, env={"TUFFDB_ENCRYPTION_KEY": "abcd"})
    with pytest.raises(ConfigError, match="cannot read"):
        load({"encryption_key_file": str(tmp_path / "missing")}, env={})


def test_env_key_beats_toml_key_file_and_flag_key_file_beats_env_key(tmp_path: Path) -> None:
    other = bytes(32)
    (tmp_path / "toml.key").write_bytes(other)
    (tmp_path / "flag.key").write_bytes(KEY)
    toml = write_toml(tmp_path, 'encryption_key_file = "toml.key"\n')
    env = {"TUFFDB_ENCRYPTION_KEY": KEY.hex()}
    config = load({"config": str(toml)}, env=env)
    assert config.encryption_key_file is None
    assert encryption_key(config, env) == KEY
    env = {"TUFFDB_ENCRYPTION_KEY": other.hex()}
    config = load({"encryption_key_file": str(tmp_path / "flag.key")}, env=env)
    assert encryption_key(config, env) == KEY


def test_redacted_masks_passwords_and_api_keys(tmp_path: Path) -> None:
    toml = write_toml(tmp_path, "[http]\napi_key = 'sekrit-extra'\nport_hint = 1\n")
    config = load({"config": str(toml), "requirepass": "sekrit-pass"},
                  env={"TUFFDB_API_KEY": "sekrit-api"})
    shown = redacted(config)
    assert "sekrit" not in repr(shown)
    assert shown["requirepass"] == shown["api_key"] == REDACTED
    assert shown["extra"] == {"http": {"api_key": REDACTED, "port_hint": 1}}
    assert redacted(load({}, env={}))["requirepass"] is None


def test_absent_flags_leave_no_attribute_so_env_can_win() -> None:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    args = vars(parser.parse_args(["--resp-port", "7", "--data-dir", "x"]))
    assert args == {"resp_port": "7", "data_dir": "x"}


def test_cluster_options_need_etcd_and_a_node_id() -> None:
    with pytest.raises(ConfigError, match="etcd"):
        load({"cluster": "c1"}, env={})
    config = load({"cluster": "c1", "etcd": "http://127.0.0.1:2379", "node_id": "n1",
                   "sync_replicas": "0"}, env={})
    assert (config.cluster, config.node_id, config.sync_replicas) == ("c1", "n1", 0)
    assert load({}, env={}).sync_replicas is None  # the default: 1 once there are followers
    with pytest.raises(ConfigError, match="node-id"):
        load({"cluster": "c1", "etcd": "http://e", "node_id": "bad name"}, env={})
    with pytest.raises(ConfigError, match="both 9090"):
        load({"cluster": "c1", "etcd": "http://e", "node_id": "n", "replication_port": "9090"},
             env={})


@pytest.mark.parametrize(("given", "expected"), [
    ({"flags": {"protected_mode": "no"}}, False), ({"env": {"TUFFDB_PROTECTED_MODE": "no"}}, False),
    ({"toml": "protected_mode = false\n"}, False), ({"toml": 'protected_mode = "yes"\n'}, True),
    ({}, True),
])
def test_protected_mode_comes_from_flags_env_and_toml(
        tmp_path: Path, given: dict[str, Any], expected: bool) -> None:
    """Protected mode (security/protected.py) is on unless turned off; TOML may say it
    with a boolean."""
    env = dict(given.get("env", {}))
    if "toml" in given:
        path = tmp_path / "tuffdb.toml"
        path.write_text(given["toml"])
        env["TUFFDB_CONFIG"] = str(path)
    assert load(given.get("flags", {}), env=env).protected_mode is expected


def test_protected_mode_refuses_other_words() -> None:
    with pytest.raises(ConfigError, match="yes or no"):
        load({"protected_mode": "maybe"}, env={})
