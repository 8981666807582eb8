"""The ``tuffdb`` command line: version, usage errors (exit 2), config printing, store commands.

Operators script against exit codes (0 ok, 1 problems, 2 usage), so each is pinned here.
The store commands run against the real KV engine and the real event store, and their
exit-code logic also against a stand-in store so it is covered on its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Self

import pytest

import tuffdb.__main__ as cli
from tuffdb._version import __version__
from tuffdb.events import Event, EventStore
from tuffdb.kv.store import KVStore

VENV_BIN = Path(sys.executable).parent


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TUFFDB_")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "tuffdb", *args], capture_output=True,
                          text=True, env=full_env, timeout=60, check=False)


def test_version_prints_name_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["version"]) == 0
    assert capsys.readouterr().out == f"tuffdb {__version__}\n"


def test_dash_dash_version_is_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"tuffdb {__version__}\n"


def test_python_dash_m_and_console_script_agree() -> None:
    module = run_cli("version")
    script = subprocess.run([str(VENV_BIN / "tuffdb"), "version"], capture_output=True,
                            text=True, timeout=60, check=False)
    assert module.returncode == script.returncode == 0
    assert module.stdout == script.stdout == f"tuffdb {__version__}\n"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((), "the following arguments are required: COMMAND"),
        (("serve", "--no-such-flag"), "unrecognized arguments: --no-such-flag"),
        (("serve", "--resp-port", "abc"), "--resp-port: 'abc' must be an integer"),
        (("serve", "--durability", "maybe"), "must be one of always, interval, none"),
        (("serve", "--admin-port", "7000", "--http-port", "7000"), "give each its own port"),
        (("check",), "the following arguments are required: PATH"),
    ],
)
def test_usage_errors_exit_2_with_a_clear_message(args: tuple[str, ...], fragment: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    assert fragment in result.stderr
    assert "usage: tuffdb" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_env_value_is_a_usage_error_naming_the_variable() -> None:
    result = run_cli("serve", env={"TUFFDB_INTERVAL_MS": "soon"})
    assert result.returncode == 2
    assert "env TUFFDB_INTERVAL_MS: 'soon' must be an integer" in result.stderr


def test_print_config_applies_precedence_and_redacts_secrets(tmp_path: Path) -> None:
    toml = tmp_path / "t.toml"
    toml.write_text("resp_port = 1111\ngrpc_port = 2222\nhttp_port = 3333\n[resp]\nx = 1\n")
    result = run_cli(
        "serve", "--config", str(toml), "--resp-port", "6666", "--requirepass", "hunter2",
        "--print-config", env={"TUFFDB_RESP_PORT": "4444", "TUFFDB_GRPC_PORT": "5555"},
    )
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert (shown["resp_port"], shown["grpc_port"], shown["http_port"]) == (6666, 5555, 3333)
    assert shown["admin_port"] == 9090
    assert shown["extra"] == {"resp": {"x": 1}}
    assert "hunter2" not in result.stdout
    assert shown["requirepass"] == "***"


def test_store_command_on_a_missing_directory_exits_2(tmp_path: Path) -> None:
    result = run_cli("check", str(tmp_path / "nope"))
    assert result.returncode == 2
    assert "is not a directory" in result.stderr
    assert not (tmp_path / "nope").exists()


class FakeStore:
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        self.calls: list[str] = []

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.calls.append("close")

    def check(self) -> list[str]:
        return self.problems

    def stats(self) -> dict[str, Any]:
        return {"keys": 3, "path": Path("/p")}

    def compact(self) -> None:
        self.calls.append("compact")

    def sync(self) -> None:
        self.calls.append("sync")


@pytest.mark.parametrize(("problems", "code"), [([], 0), (["bad crc in 000001.log"], 1)])
def test_check_exits_1_exactly_when_problems_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    problems: list[str], code: int,
) -> None:
    store = FakeStore(problems)
    monkeypatch.setattr(cli, "_open_store", lambda _path, _key: store)
    assert cli.main(["check", str(tmp_path)]) == code
    out = capsys.readouterr().out
    assert ("problem: bad crc in 000001.log" in out) == bool(problems)
    assert store.calls == ["close"]


def test_stat_prints_json_and_compact_compacts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = FakeStore([])
    monkeypatch.setattr(cli, "_open_store", lambda _path, _key: store)
    assert cli.main(["stat", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out) == {"keys": 3, "path": "/p"}
    assert cli.main(["compact", str(tmp_path)]) == 0
    assert store.calls == ["close", "compact", "sync", "close"]
    assert json.loads(capsys.readouterr().out)["path"] == str(tmp_path)


# -- against the real KV engine ---------------------------------------------------


@pytest.fixture
def kv_dir(tmp_path: Path) -> Path:
    path = tmp_path / "kv"
    with KVStore.open(path) as store:
        for i in range(200):
            store.put(b"key%03d" % i, b"value" * i)
        for i in range(0, 200, 2):
            store.put(b"key%03d" % i, b"new")
    return path


def test_check_stat_compact_on_a_real_kv_store(kv_dir: Path) -> None:
    check = run_cli("check", str(kv_dir))
    assert (check.returncode, check.stdout.strip()) == (0, f"{kv_dir}: ok"), check.stderr
    stat = run_cli("stat", str(kv_dir))
    assert stat.returncode == 0, stat.stderr
    assert isinstance(json.loads(stat.stdout), dict)
    compact = run_cli("compact", str(kv_dir))
    assert compact.returncode == 0, compact.stderr
    assert json.loads(compact.stdout)["bytes_before"] > 0
    with KVStore.open(kv_dir) as store:
        assert store.get(b"key000") == b"new"
        assert store.get(b"key199") == b"value" * 199


def test_check_exits_1_on_a_flipped_byte_in_a_kv_data_file(kv_dir: Path) -> None:
    with KVStore.open(kv_dir) as store:
        store.compact()  # everything in cold, checksummed segments
    data = max((p for p in kv_dir.iterdir() if p.name != "LOCK"), key=lambda p: p.stat().st_size)
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data.write_bytes(bytes(raw))
    check = run_cli("check", str(kv_dir))
    assert check.returncode == 1, (check.stdout, check.stderr)
    assert check.stdout.startswith("problem: ")
    assert check.stdout.rstrip().endswith("problem(s) found")


# -- against the real event store: dispatched by the segment header's file kind ----


def test_check_stat_compact_dispatch_to_an_event_store(tmp_path: Path) -> None:
    path = tmp_path / "events"
    with EventStore.open(path) as store:
        store.append([Event("Opened", b"{}", ["account-1"]) for _ in range(5)])
    assert cli._store_kind(path) == "events"  # noqa: SLF001
    check = run_cli("check", str(path))
    assert (check.returncode, check.stdout.strip()) == (0, f"{path}: ok"), check.stderr
    stat = run_cli("stat", str(path))
    assert stat.returncode == 0, stat.stderr
    shown = json.loads(stat.stdout)
    assert (shown["kind"], shown["head"], shown["recovery_bytes_dropped"]) == ("events", 5, 0)
    compact = run_cli("compact", str(path))
    assert compact.returncode == 0, compact.stderr
    assert "append-only" in compact.stderr


def test_empty_directory_is_treated_as_kv(tmp_path: Path) -> None:
    assert cli._store_kind(tmp_path) == "kv"  # noqa: SLF001


def test_store_command_on_a_serve_data_directory_names_its_stores(tmp_path: Path) -> None:
    (tmp_path / "kv").mkdir()
    (tmp_path / "events").mkdir()
    result = run_cli("stat", str(tmp_path))
    assert result.returncode == 2
    assert f"pass one of its stores: {tmp_path / 'kv'}, {tmp_path / 'events'}" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events", "kv"]
