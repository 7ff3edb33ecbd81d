#!/usr/bin/env python3
"""What a session's row costs SQLite to write (issue 31). Two measurements, each on a table
shaped like the state file's `sessions` (WAL, synchronous NORMAL, SQLite's default page size and
2 MB page cache), Python's own cost a row included in every figure. The system's libsqlite3, as
navigatord's.

  scripts/bench-sqlite-rows.py [SESSIONS] [ROUNDS]      (20000, 12)

By how the rows are placed: SESSIONS rows of about 4.6 KB with random 32-hex-digit ids, then
ROUNDS rounds that each rewrite half the rows in transactions of 1,000, as the write-behind did.
The CPU microseconds a row written (the median round after two of warm-up), three runs each:

  by-id     every row written by id (an upsert through the id index), in any order (before)
  at-place  every row written at its row id, learned when it was inserted, each chunk sorted
            by it (`UPDATE ... WHERE rowid = ? AND id = ?`: what StateFile does now)

  scripts/bench-sqlite-rows.py pages [ROW,ROW,...] [CHECKPOINT,...] [SESSIONS] [ROUNDS]
      (2600,3900,4400 1000,10000 20000 400)

By the size of a row and how often the log is checkpointed: SESSIONS rows of ROW bytes, then
ROUNDS transactions that each rewrite 250 rows chosen at random at their row ids in row-id
order, as the write-behind's chunks do (StateFile.write). For each row size: the log frames
written a change (counted with checkpoints off: every page a transaction dirties goes to the log
whole), then for each `wal_autocheckpoint` the CPU and the wall-clock µs a change, the
checkpoints SQLite runs at each commit (and their fdatasync) included.
"""
import contextlib
import os
import random
import resource
import sqlite3
import sys
import tempfile
import time

CHUNK = 250  # Persistence.chunk


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def sessions_table(ids, blob):
    """A fresh state-file-like database in a temporary directory holding one row for each of
    `ids` (appended in that order, as sessions are created when they first come), its state
    `blob(k)`, checkpointed; yields the connection and the database's path."""
    with tempfile.TemporaryDirectory(prefix="sqlrows") as directory:
        path = os.path.join(directory, "navigator.sqlite")
        db = sqlite3.connect(path, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute(
                "CREATE TABLE sessions (id TEXT PRIMARY KEY NOT NULL, seq INTEGER NOT NULL, "
                "state BLOB NOT NULL, updated_at INTEGER NOT NULL)")
            db.execute("BEGIN")
            for k, ident in enumerate(ids):
                db.execute("INSERT INTO sessions (id, seq, state, updated_at) VALUES (?, 0, ?, 0)",
                           (ident, blob(k)))
            db.execute("COMMIT")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            yield db, path
        finally:
            db.close()


def placed_run(placed, sessions, rounds, seed):
    rnd = random.Random(seed)
    ids = ["%032x" % rnd.getrandbits(128) for _ in range(sessions)]
    blobs = [os.urandom(4600 + rnd.randint(-300, 300)) for _ in range(64)]
    with sessions_table(ids, lambda k: blobs[k % 64]) as (db, _):
        places = dict(db.execute("SELECT id, rowid FROM sessions").fetchall())
        places = [places[ident] for ident in ids]
        if placed:
            write = "UPDATE sessions SET seq = ?, state = ?, updated_at = ? WHERE rowid = ? AND id = ?"
        else:
            write = ("INSERT INTO sessions (seq, state, updated_at, id) VALUES (?, ?, ?, ?) "
                     "ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, state = excluded.state, "
                     "updated_at = excluded.updated_at")
        costs = []
        for round_ in range(rounds):
            chosen = rnd.sample(range(sessions), sessions // 2)
            if placed:
                chosen.sort(key=lambda k: places[k])
                rows = [(round_, blobs[(k + round_) % 64], 0, places[k], ids[k]) for k in chosen]
            else:
                rows = [(round_, blobs[(k + round_) % 64], 0, ids[k]) for k in chosen]
            start = cpu()
            for first in range(0, len(rows), 1000):
                db.execute("BEGIN")
                db.executemany(write, rows[first:first + 1000])
                db.execute("COMMIT")
            costs.append((cpu() - start) / len(rows) * 1e6)
        kept = sorted(costs[2:])
        return kept[len(kept) // 2]


def pages_run(row, checkpoint, sessions, rounds, seed=1):
    """(log frames a change, or None unless `checkpoint` is 0; CPU µs; wall µs)."""
    rnd = random.Random(seed)
    ids = ["%032x" % rnd.getrandbits(128) for _ in range(sessions)]
    blobs = [os.urandom(row) for _ in range(CHUNK)]
    with sessions_table(ids, lambda k: blobs[k % CHUNK]) as (db, path):
        db.execute(f"PRAGMA wal_autocheckpoint = {checkpoint}")
        write = "UPDATE sessions SET seq = ?, state = ?, updated_at = 1 WHERE rowid = ?"
        start_cpu, start_wall = cpu(), time.perf_counter()
        for round_ in range(rounds):
            chosen = sorted(rnd.sample(range(1, sessions + 1), CHUNK))
            db.execute("BEGIN")
            db.executemany(write, [(round_, blobs[k], rowid) for k, rowid in enumerate(chosen)])
            db.execute("COMMIT")
        changes = rounds * CHUNK
        cpu_us = (cpu() - start_cpu) / changes * 1e6
        wall_us = (time.perf_counter() - start_wall) / changes * 1e6
        frames = None
        if checkpoint == 0:
            page = db.execute("PRAGMA page_size").fetchone()[0]
            frames = (os.path.getsize(path + "-wal") - 32) / (page + 24) / changes
        return frames, cpu_us, wall_us


def by_placement(args):
    sessions = int(args[0]) if len(args) > 0 else 20000
    rounds = int(args[1]) if len(args) > 1 else 12
    print(f"{sessions} rows, {rounds} rounds of {sessions // 2} in transactions of 1,000; "
          f"CPU µs a row written (median round), three runs each, alternating")
    results = {"by-id": [], "at-place": []}
    for seed in (1, 2, 3):
        for name, placed in (("by-id", False), ("at-place", True)):
            results[name].append(placed_run(placed, sessions, rounds, seed))
    for name, values in results.items():
        print(f"{name:9} " + ", ".join(f"{value:.1f}" for value in values))


def by_size(args):
    rows = [int(x) for x in (args[0] if len(args) > 0 else "2600,3900,4400").split(",")]
    checkpoints = [int(x) for x in (args[1] if len(args) > 1 else "1000,10000").split(",")]
    sessions = int(args[2]) if len(args) > 2 else 20000
    rounds = int(args[3]) if len(args) > 3 else 400
    print(f"{sessions} rows, {rounds} transactions of {CHUNK} changes; pages a change with checkpoints off, "
          "then CPU and wall µs a change by wal_autocheckpoint (Python's cost included)")
    for row in rows:
        frames, _, _ = pages_run(row, 0, sessions, min(rounds, 100))
        costs = []
        for checkpoint in checkpoints:
            _, cpu_us, wall_us = pages_run(row, checkpoint, sessions, rounds)
            costs.append(f"{checkpoint}: cpu {cpu_us:.1f}, wall {wall_us:.1f}")
        print(f"row {row:5} bytes: {frames:.2f} pages a change; " + "; ".join(costs))


if __name__ == "__main__":
    if sys.argv[1:2] == ["pages"]:
        by_size(sys.argv[2:])
    else:
        by_placement(sys.argv[1:])
