#!/usr/bin/env python3
"""What a session's row costs SQLite to write, by how the rows are placed (issue 31).

A table shaped like the state file's `sessions` (WAL, synchronous NORMAL, SQLite's default 2 MB
page cache) holding SESSIONS rows of about 4.6 KB (what navload's sessions weigh after ten
minutes), with random 32-hex-digit ids; then ROUNDS rounds that each rewrite half the rows in
transactions of 1,000, as the write-behind does. Prints the CPU microseconds a row written
(the median round after two of warm-up), for:

  by-id     every row written by id (an upsert through the id index), in any order (before)
  at-place  every row written at its row id, learned when it was inserted, each chunk sorted
            by it (`UPDATE ... WHERE rowid = ? AND id = ?`: what StateFile does now)

Python's own cost a row is in both figures. Uses the system's libsqlite3, as navigatord does.

  scripts/bench-sqlite-rows.py [SESSIONS] [ROUNDS]      (20000, 12)
"""
import os
import random
import resource
import sqlite3
import sys
import tempfile


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(placed, sessions, rounds, seed):
    directory = tempfile.mkdtemp(prefix="sqlrows")
    path = os.path.join(directory, "navigator.sqlite")
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY NOT NULL, seq INTEGER NOT NULL, "
            "state BLOB NOT NULL, updated_at INTEGER NOT NULL)")
        rnd = random.Random(seed)
        ids = ["%032x" % rnd.getrandbits(128) for _ in range(sessions)]
        blobs = [os.urandom(4600 + rnd.randint(-300, 300)) for _ in range(64)]
        # Sessions are created (appended) in the order they first come.
        db.execute("BEGIN")
        for k in range(sessions):
            db.execute("INSERT INTO sessions (id, seq, state, updated_at) VALUES (?, 0, ?, 0)",
                       (ids[k], blobs[k % 64]))
        db.execute("COMMIT")
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
    finally:
        db.close()
        for name in os.listdir(directory):
            os.remove(os.path.join(directory, name))
        os.rmdir(directory)


def main():
    sessions = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    print(f"{sessions} rows, {rounds} rounds of {sessions // 2} in transactions of 1,000; "
          f"CPU µs a row written (median round), three runs each, alternating")
    results = {"by-id": [], "at-place": []}
    for seed in (1, 2, 3):
        for name, placed in (("by-id", False), ("at-place", True)):
            results[name].append(run(placed, sessions, rounds, seed))
    for name, values in results.items():
        print(f"{name:9} " + ", ".join(f"{value:.1f}" for value in values))


if __name__ == "__main__":
    main()
