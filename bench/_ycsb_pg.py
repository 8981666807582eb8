"""PostgreSQL 15 for YCSB: started by the benchmark (as the ``postgres`` user when run as
root), loaded with COPY, driven by pgbench custom scripts (a C load generator), one client
per YCSB thread (``-c N -j N``), prepared statements, time-bounded (``-T``) after an
untimed warm-up run.

Table ``usertable(n bigint primary key, ycsb_key text, doc jsonb)``: the record is one JSONB
document ``{"field0": ..., ..., "field9": ...}`` (a document store against a document
store), keyed by the record number (a bigint btree; the YCSB string key is stored beside
it), which if anything favours PostgreSQL. Read = ``SELECT doc``; update = ``jsonb_set`` of
one random field; F = read then update in one script (one op, one latency sample); D
inserts a new document with the next sequence value. Deviations from YCSB, forced by
pgbench: ``random_zipfian`` accepts only parameters >= 1.001, so the skew is 1.001 instead
of 0.99 (slightly more skewed), scrambled with ``permute``; workload D reads
``last_value`` of the insert sequence minus a Zipfian offset (a read of a row whose insert
has not committed yet finds nothing; pgbench does not count that as an error).
"""

# Benchmark support, not library code.
# ruff: noqa: INP001, CPY001, S603, S608, PLR0913, PLR0917, E501, ISC004
from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
from _ycsb_work import FIELDS, key, record

PG_BIN = Path("/usr/lib/postgresql/15/bin")
READY = "database system is ready to accept connections"


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _pin(cmd: list[str], cpu: int | None) -> list[str]:
    return ["taskset", "-c", str(cpu), *cmd] if cpu is not None and shutil.which("taskset") else cmd


class Postgres:
    def __init__(self, base: Path, port: int, cpu: int | None) -> None:
        self.dir, self.port = base / "pg", port
        self.dir.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(base, "postgres")
            shutil.chown(self.dir, "postgres")
        subprocess.run(
            _as_postgres(
                [
                    str(PG_BIN / "initdb"),
                    "-D",
                    str(self.dir),
                    "-U",
                    "bench",
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--no-instructions",
                ]
            ),
            check=True,
            capture_output=True,
        )
        cmd = [
            str(PG_BIN / "postgres"),
            "-D",
            str(self.dir),
            "-k",
            str(self.dir),
            "-p",
            str(port),
            "-c",
            "listen_addresses=",
            "-c",
            "synchronous_commit=on",
            "-c",
            "fsync=on",
            "-c",
            "shared_buffers=512MB",
            "-c",
            "max_connections=200",
        ]
        self.command = _pin(_as_postgres(cmd), cpu)
        self.proc = subprocess.Popen(self.command, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if READY in line:
                break
        else:
            raise RuntimeError("postgres exited before it was ready")
        self.conn = ["-h", str(self.dir), "-p", str(port), "-U", "bench"]

    def psql(self, sql: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [
                str(PG_BIN / "psql"),
                *self.conn,
                "-d",
                "postgres",
                "-tA",
                "-v",
                "ON_ERROR_STOP=1",
                "-q",
                "-c",
                sql,
            ],
            input=stdin,
            text=True,
            capture_output=True,
            check=True,
        )
        return done.stdout

    def load(self, recordcount: int, seed: int) -> None:
        self.psql(
            "CREATE TABLE usertable (n bigint PRIMARY KEY, ycsb_key text NOT NULL, doc jsonb NOT NULL)"
        )
        # text COPY format: the records are alphanumeric, so the JSON needs no escaping
        rows = "".join(
            f"{n}\t{key(n)}\t{json.dumps(record(n, seed), separators=(',', ':'))}\n"
            for n in range(recordcount)
        )
        self.psql("COPY usertable FROM STDIN", stdin=rows)
        self.psql(f"CREATE SEQUENCE ins START {recordcount}")
        self.psql("VACUUM ANALYZE usertable")

    def scripts(self, workdir: Path, workload: str) -> list[str]:
        pick = r"\set n permute(random_zipfian(0, :rc - 1, 1.001), :rc, 42)" + "\n"
        read = pick + "SELECT doc FROM usertable WHERE n = :n;\n"
        upd = (
            r"\set f random(0, 9)" + "\n"
            "UPDATE usertable SET doc = jsonb_set(doc, ARRAY['field' || :f], "
            "to_jsonb(repeat('u', 100))) WHERE n = :n;\n"
        )
        files: dict[str, tuple[str, float]] = {}
        if workload in ("A", "B", "C", "F"):
            read_share = {"A": 50, "B": 95, "C": 100, "F": 50}[workload]
            files["read"] = (read, read_share)
            if workload in ("A", "B"):
                files["update"] = (pick + upd, 100 - read_share)
            elif workload == "F":
                files["rmw"] = (read + upd, 50)
        elif workload == "D":
            doc = json.dumps(dict.fromkeys(FIELDS, "i" * 100), separators=(",", ":"))
            files["insert"] = (
                "INSERT INTO usertable VALUES (nextval('ins'), 'user' || "
                f"currval('ins'), '{doc}');\n",
                5.0,
            )
            files["read"] = (
                r"\set z random_zipfian(0, :rc - 1, 1.001)" + "\n"
                "SELECT doc FROM usertable WHERE n = (SELECT last_value FROM ins) - :z;\n",
                95.0,
            )
        else:  # the generator's ceiling
            files["trivial"] = ("SELECT 1;\n", 100.0)
        args = []
        for name, (text, weight) in files.items():
            path = workdir / f"{workload}_{name}.sql"
            path.write_text(text)
            args += ["-f", f"{path}@{max(1, round(weight * 10))}"]
        return args

    def pgbench(
        self,
        workdir: Path,
        workload: str,
        clients: int,
        warmup: float,
        duration: float,
        ops_cap: int,
        recordcount: int,
        cpu: int | None,
    ) -> dict[str, Any]:
        """One cell: an untimed ``-T warmup`` run, then ``-T duration`` (or, with ``ops_cap``,
        ``-t ops_cap / clients`` transactions per client) with every transaction logged."""
        workdir.mkdir(parents=True, exist_ok=True)
        scripts = self.scripts(workdir, workload)
        base = [
            str(PG_BIN / "pgbench"),
            *self.conn,
            "-n",
            "-M",
            "prepared",
            "-c",
            str(clients),
            "-j",
            str(clients),
            "-D",
            f"rc={recordcount}",
            *scripts,
        ]
        if warmup:
            subprocess.run(
                _pin([*base, "-T", str(max(1, math.ceil(warmup))), "postgres"], cpu),
                check=True,
                capture_output=True,
                text=True,
            )
        logs = workdir / f"log_{workload}_{clients}"
        bound = (
            ["-t", str(max(1, math.ceil(ops_cap / clients)))]
            if ops_cap
            else ["-T", str(max(1, math.ceil(duration)))]
        )
        cmd = _pin([*base, *bound, "-l", "--log-prefix", str(logs), "postgres"], cpu)
        done = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=workdir)
        tps = float(re.search(r"tps = ([0-9.]+) \(without initial", done.stdout).group(1))  # type: ignore[union-attr]
        lat = []
        for log in workdir.glob(f"log_{workload}_{clients}*"):
            lat.extend(int(line.split()[2]) * 1000 for line in log.read_text().splitlines() if line)
            log.unlink()
        failed = re.search(r"number of failed transactions: (\d+)", done.stdout)
        return {
            "ops": len(lat),
            "ops_per_s": tps,
            "errors": int(failed.group(1)) if failed else 0,
            "latencies_ns": np.asarray(lat, dtype=np.int64),
            "command": " ".join(cmd),
            "generator": "pgbench (C), custom scripts",
        }

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)
