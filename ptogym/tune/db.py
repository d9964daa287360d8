"""The sweep database: every trial and every winner check, in SQLite.

One row per trial (``trials``): operator, level, band, the measurement it used, the
configuration (JSON, and its sorted-key text to find repeats), where it came from
(``table``: the tuned table's values, ``plain``, ``search``), status (``ok``,
``rejected``, ``failed``, ``timeout``, ``memory``) with the reason, µs (first to last
task, ``us``; whole kernel, ``kernel_us``), compile time, peak resident memory, wall
time, engine and host.  ``checks`` holds the winners' checks on pypto's interpreter.

Only the driver writes (Ray tasks return their records to it).  Each write is one
short transaction in WAL mode with a generous busy timeout, so sweeps run at the same
time on one file (two operators, two shells) interleave safely; a sweep started again
on the same file goes on from the trials it finds there (``ptogym tune --trials`` is a
total per level).
"""
from __future__ import annotations

import contextlib
import json
import socket
import sqlite3
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    op TEXT NOT NULL, level TEXT NOT NULL, band TEXT NOT NULL, measure TEXT NOT NULL,
    config TEXT NOT NULL, config_key TEXT NOT NULL, origin TEXT NOT NULL,
    status TEXT NOT NULL, reason TEXT,
    us REAL, kernel_us REAL, compile_s REAL, wall_s REAL, peak_rss_bytes INTEGER, tasks INTEGER, cache TEXT,
    engine TEXT, host TEXT, finished_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS trials_level ON trials (op, level, measure);
CREATE TABLE IF NOT EXISTS checks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    op TEXT NOT NULL, level TEXT NOT NULL, measure TEXT NOT NULL, config_key TEXT NOT NULL, backend TEXT NOT NULL,
    verdict TEXT NOT NULL, reason TEXT, finished_at REAL NOT NULL
);
"""
TRIAL_FIELDS = ("us", "kernel_us", "compile_s", "wall_s", "peak_rss_bytes", "tasks", "cache")


class Database:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        with self._connect() as connection:
            connection.executescript(SCHEMA)

    @contextlib.contextmanager
    def _connect(self):
        connection = sqlite3.connect(self.path, timeout=120.0)
        connection.row_factory = sqlite3.Row
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            with connection:  # one transaction, committed on success
                yield connection
        finally:
            connection.close()

    def add_trial(self, *, op, level, band, measure, config: dict, config_key: str, origin: str, record: dict,
                  engine: str) -> int:
        values = {"op": op, "level": level, "band": band, "measure": measure, "config": json.dumps(config),
                  "config_key": config_key, "origin": origin, "status": record["status"],
                  "reason": record.get("reason"), "engine": engine, "host": record.get("host") or socket.gethostname(),
                  "finished_at": time.time(), **{name: record.get(name) for name in TRIAL_FIELDS}}
        names = ", ".join(values)
        with self._connect() as connection:
            cursor = connection.execute(f"INSERT INTO trials ({names}) VALUES ({', '.join('?' * len(values))})",
                                        tuple(values.values()))
            return cursor.lastrowid

    def trials(self, op: str, level: str | None = None, measure: str | None = None) -> list[dict]:
        query, args = "SELECT * FROM trials WHERE op = ?", [op]
        for column, value in (("level", level), ("measure", measure)):
            if value is not None:
                query += f" AND {column} = ?"
                args.append(value)
        with self._connect() as connection:
            rows = connection.execute(query + " ORDER BY id", args).fetchall()
        return [{**dict(row), "config": json.loads(row["config"])} for row in rows]

    def add_check(self, *, op, level, measure, config_key, backend, verdict, reason) -> None:
        with self._connect() as connection:
            connection.execute("INSERT INTO checks (op, level, measure, config_key, backend, verdict, reason, "
                               "finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                               (op, level, measure, config_key, backend, verdict, reason, time.time()))

    def checks(self, op: str, level: str) -> list[dict]:
        with self._connect() as connection:
            rows = connection.execute("SELECT * FROM checks WHERE op = ? AND level = ? ORDER BY id",
                                      (op, level)).fetchall()
        return [dict(row) for row in rows]
