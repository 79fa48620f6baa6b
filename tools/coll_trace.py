#!/usr/bin/env python3
"""coll_trace.py LOG... - read the "COLLT" lines of a lab build of the
collectives (-DMKI_COLL_TRACE=N, tests/gpu/coll_build.sh) and print where a
traced call's time goes: for each step, the median over the traced calls,
ranks and CTAs of the microseconds from the CTA's entry to the step's first
and last stamp, and the spread of the ranks' entries of one call (the GPUs'
globaltimers are close but not guaranteed equal: read it as a bound)."""
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
    groups = collections.defaultdict(list)  # (log, e, rank, cta) -> [(ev, arg, t)]
    for path in paths:
        with open(path, errors="replace") as f:
            for line in f:
                m = LINE.search(line)
                if not m:
                    continue
                e, rank, cta, nch, ev, arg, t = map(int, m.groups())
                groups[(path, e, rank, cta, nch)].append((ev, arg, t))
    if not groups:
        print("no COLLT lines")
        return 1
    first = collections.defaultdict(list)
    last = collections.defaultdict(list)
    count = collections.defaultdict(list)
    entries = collections.defaultdict(list)  # (log, e) -> entry stamps of every rank's CTAs
    for (path, e, rank, cta, nch), evs in groups.items():
        t0 = min(t for ev, _, t in evs if ev == 1) if any(ev == 1 for ev, _, _ in evs) else None
        if t0 is None:
            continue
        entries[(path, e)].append(t0)
        pos = "first" if cta == 0 else "last" if cta == nch - 1 else "middle"
        per = collections.defaultdict(list)
        for ev, _, t in evs:
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
    spread = [(max(v) - min(v)) / 1000.0 for v in entries.values() if len(v) > 1]
    if spread:
        print("entries of one call across ranks and CTAs: spread median %.1f us, max %.1f us "
              "(%d calls)" % (statistics.median(spread), max(spread), len(spread)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
