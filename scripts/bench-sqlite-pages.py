#!/usr/bin/env python3
"""What a changed session costs SQLite, by the size of its row and how often the log is
checkpointed (issue 31).

A table shaped like the state file's `sessions` (WAL, synchronous NORMAL, the page size SQLite
gives a new file), SESSIONS rows of ROW bytes each, then ROUNDS transactions that each rewrite
250 rows chosen at random at their row ids in row-id order, as the write-behind's chunks do
(StateFile.write). For each row size and each `wal_autocheckpoint` it prints:

  pages    log frames written a change (counted with checkpoints off: every page a transaction
           dirties goes to the log whole)
  cpu      CPU µs a change, the checkpoints SQLite runs at each commit included
  wall     wall-clock µs a change (the checkpoints' fdatasync among it)

Python's own cost a change is in cpu and wall alike. The system's libsqlite3, as navigatord's.

  scripts/bench-sqlite-pages.py [ROW,ROW,...] [CHECKPOINT,CHECKPOINT,...] [SESSIONS] [ROUNDS]
      (2600,3900,4400 1000,10000 20000 400)
"""
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


def run(row, checkpoint, sessions, rounds, seed=1):
    directory = tempfile.mkdtemp(prefix="sqlpages")
    path = os.path.join(directory, "navigator.sqlite")
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY NOT NULL, seq INTEGER NOT NULL, "
                   "state BLOB NOT NULL, updated_at INTEGER NOT NULL)")
        rnd = random.Random(seed)
        blobs = [os.urandom(row) for _ in range(CHUNK)]
        db.execute("BEGIN")
        for k in range(sessions):
            db.execute("INSERT INTO sessions VALUES (?, 0, ?, 0)", ("%032x" % rnd.getrandbits(128), blobs[k % CHUNK]))
        db.execute("COMMIT")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute(f"PRAGMA wal_autocheckpoint = {checkpoint}")
        write = "UPDATE sessions SET seq = ?, state = ?, updated_at = 1 WHERE rowid = ?"
        start_cpu, start_wall = cpu(), time.perf_counter()
        for round_ in range(rounds):
            chosen = sorted(rnd.sample(range(1, sessions + 1), CHUNK))
            db.execute("BEGIN")
            db.executemany(write, [(round_, blobs[k], rowid) for k, rowid in enumerate(chosen)])
            db.execute("COMMIT")
        changes = rounds * CHUNK
        figures = ((cpu() - start_cpu) / changes * 1e6, (time.perf_counter() - start_wall) / changes * 1e6)
        frames = None
        if checkpoint == 0:
            page = db.execute("PRAGMA page_size").fetchone()[0]
            frames = (os.path.getsize(path + "-wal") - 32) / (page + 24) / changes
        return frames, figures
    finally:
        db.close()
        for name in os.listdir(directory):
            os.remove(os.path.join(directory, name))
        os.rmdir(directory)


def main():
    rows = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "2600,3900,4400").split(",")]
    checkpoints = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "1000,10000").split(",")]
    sessions = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 400
    print(f"{sessions} rows, {rounds} transactions of {CHUNK} changes; pages a change with checkpoints off, "
          "then CPU and wall µs a change by wal_autocheckpoint (Python's cost included)")
    for row in rows:
        frames, _ = run(row, 0, sessions, min(rounds, 100))
        costs = [f"{checkpoint}: cpu {c:.1f}, wall {w:.1f}"
                 for checkpoint in checkpoints
                 for _, (c, w) in [run(row, checkpoint, sessions, rounds)]]
        print(f"row {row:5} bytes: {frames:.2f} pages a change; " + "; ".join(costs))


if __name__ == "__main__":
    main()
