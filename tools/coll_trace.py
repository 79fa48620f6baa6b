#!/usr/bin/env python3
"""coll_trace.py LOG... - read the "COLLT" lines of a lab build of the
collectives (-DMKI_COLL_TRACE=N, tests/gpu/coll_build.sh) and print where a
traced call's time goes: for each step, the median over the traced calls,
ranks and CTAs of the microseconds from the CTA's entry to the step's first
and last stamp.  Only stamps of one rank are compared: the GPUs'
globaltimers are not one clock (hundreds of microseconds apart on 4 x H100,
bench/NOTES.md)."""
import collections
import re
import statistics
import sys

NAMES = {1: "enter", 14: "send: start", 2: "send: credit ok", 3: "send: chunk issued",
         4: "send: end (flushed)", 16: "chunk 0: owed credit checked",
         5: "reduce: chunk arrived", 17: "reduce: round done (thread 0)",
         15: "reduce: chunk written", 6: "reduce: chunk summed", 7: "send2: chunk reduced",
         8: "send2: chunk issued", 9: "send2: end (flushed)", 10: "recv: chunk arrived",
         11: "recv: chunk copied", 12: "recv: end", 13: "leave"}

LINE = re.compile(r"COLLT e (\d+) rank (\d+) cta (\d+) nch (\d+) ev (\d+) arg (\d+) t (\d+)")


def main(paths):
    groups = collections.defaultdict(list)  # (log, e, rank, cta, nch) -> [(ev, t)]
    for path in paths:
        with open(path, errors="replace") as f:
            for line in f:
                m = LINE.search(line)
                if not m:
                    continue
                e, rank, cta, nch, ev, _arg, t = map(int, m.groups())
                groups[(path, e, rank, cta, nch)].append((ev, t))
    if not groups:
        print("no COLLT lines")
        return 1
    first = collections.defaultdict(list)
    last = collections.defaultdict(list)
    count = collections.defaultdict(list)
    for (_, _, _, cta, nch), evs in groups.items():
        entry = [t for ev, t in evs if ev == 1]
        if not entry:
            continue
        t0 = min(entry)
        pos = "first" if cta == 0 else "last" if cta == nch - 1 else "middle"
        per = collections.defaultdict(list)
        for ev, t in evs:
            per[ev].append((t - t0) / 1000.0)
        for ev, ts in per.items():
            first[(pos, ev)].append(min(ts))
            last[(pos, ev)].append(max(ts))
            count[(pos, ev)].append(len(ts))
    print("%-30s %-7s %9s %9s %6s" % ("step", "CTA", "first us", "last us", "stamps"))
    for pos in ("first", "middle", "last"):
        for ev in NAMES:  # in the order of a call
            if (pos, ev) not in first:
                continue
            print("%-30s %-7s %9.1f %9.1f %6.1f" % (
                NAMES[ev], pos, statistics.median(first[(pos, ev)]),
                statistics.median(last[(pos, ev)]), statistics.median(count[(pos, ev)])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
