#!/usr/bin/env python3
"""What the rows of a state file hold, by field (issue 31).

Reads every row of the `sessions` table of a navigator.sqlite (stop navigatord first, or copy the
file with its -wal) and decodes each `StoredSession` (proto/navigator/v1/state.proto) on the wire
format alone, without generated code: the rows' sizes (mean, median, 90th percentile, largest),
how many are larger than fit in one page of the file's b-tree (SQLite keeps the rest of such a
row in overflow pages), and the bytes a row of each field, with the parked intents and the
recently expired ones taken apart by their own fields.

  scripts/row-sizes.py PATH/navigator.sqlite
"""
import collections
import sqlite3
import sys

SESSION = {1: "seq", 2: "tree", 3: "conditions", 4: "parked", 5: "recent_intent_ids (old files)",
           6: "last_service_seq", 7: "shell_ready", 8: "recently_expired", 9: "recent_ids",
           10: "recent_ids_base_unix_nanos", 11: "app_version"}
PARKED = {1: "intent", 2: "reason (guard)", 3: "reason (blocked)", 4: "parked_at", 5: "expires_at",
          6: "reason (not ready)"}
INTENT = {1: "id", 2: "session", 3: "path", 4: "url", 5: "animated", 6: "source", 7: "priority",
          8: "ttl_ms", 9: "sent_at", 10: "set_conditions", 11: "wait_for_ready", 12: "traceparent"}
EXPIRED = {1: "intent_id", 2: "source", 3: "reason (text)", 4: "parked_at", 5: "expired_at",
           6: "why (guard)", 7: "why (blocked)", 8: "why (not ready)", 9: "waited_nanos"}


def varint(data, at):
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def fields(data):
    """(field number, bytes the field takes with its tag, its payload) for each field."""
    at = 0
    while at < len(data):
        start = at
        key, at = varint(data, at)
        wire = key & 7
        payload = b""
        if wire == 0:
            _, at = varint(data, at)
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        elif wire == 2:
            length, at = varint(data, at)
            payload = data[at:at + length]
            at += length
        else:
            raise ValueError(f"wire type {wire} at byte {start}")
        yield key >> 3, at - start, payload


def tally(message, counter, inner=None):
    """Adds the bytes each field of `message` takes to `counter`; a field numbered in `inner` is
    a message whose own fields are tallied into the counter given there."""
    for number, size, payload in fields(message):
        counter[number] += size
        if inner and number in inner:
            tally(payload, inner[number])


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
    page = db.execute("PRAGMA page_size").fetchone()[0]
    fits = page - 35  # the largest payload a table leaf keeps in the page (SQLite's maxLocal)
    sizes = []
    session, parked, intent, expired = (collections.Counter() for _ in range(4))
    parked_count = expired_count = 0
    for (state,) in db.execute("SELECT state FROM sessions"):
        sizes.append(len(state))
        for number, size, payload in fields(state):
            session[number] += size
            if number == 4:
                parked_count += 1
                tally(payload, parked, inner={1: intent})
            elif number == 8:
                expired_count += 1
                tally(payload, expired)
    rows = len(sizes)
    if rows == 0:
        sys.exit("row-sizes: the sessions table is empty")
    sizes.sort()
    over = sum(1 for size in sizes if size > fits)
    print(f"{rows} rows: mean {sum(sizes) / rows:.0f} bytes, median {sizes[rows // 2]}, "
          f"90th percentile {sizes[rows * 9 // 10]}, largest {sizes[-1]}; "
          f"{over} ({100 * over / rows:.0f} %) larger than a {page}-byte page keeps ({fits} bytes)")
    print("bytes a row, by field:")
    for number, size in session.most_common():
        print(f"  {SESSION.get(number, number):32} {size / rows:8.1f}")

    def breakdown(title, count, counter, names):
        if count:
            parts = ", ".join(f"{names.get(n, n)} {size / count:.1f}" for n, size in counter.most_common())
            print(f"{title}: {count / rows:.2f} a row, {sum(counter.values()) / count:.0f} bytes each ({parts})")

    breakdown("parked intents", parked_count, parked, PARKED)
    if parked_count:
        parts = ", ".join(f"{INTENT.get(n, n)} {size / parked_count:.1f}" for n, size in intent.most_common())
        print(f"  their intents: {parts}")
    breakdown("recently expired", expired_count, expired, EXPIRED)


if __name__ == "__main__":
    main()
