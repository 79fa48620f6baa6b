#!/usr/bin/env python3
"""Summarize the KXS / KXA lines of a MKI_KX_TRACE build (lab): per rank the
kernel's span (first entry to last end), each CTA's wait in wait_a (median,
max), and when the first peer's chunks landed (us after CTA 1's entry)."""
import re, sys, statistics as st
kxs, kxa = {}, {}
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"KXS rank (\d+) cta (\d+) t0 (\d+) t1 (\d+) stall (\d+) nwait (\d+)", line)
    if m:
        r = int(m[1]); kxs.setdefault(r, []).append(tuple(int(x) for x in m.groups()[1:]))
        continue
    m = re.search(r"KXA rank (\d+) ([AB]) (\d+) at ([-\d.]+)", line)
    if m:
        kxa.setdefault(int(m[1]), []).append((m[2], int(m[3]), float(m[4])))
for r in sorted(kxs):
    v = kxs[r]
    t0 = min(x[1] for x in v); t1 = max(x[2] for x in v)
    stall = [x[3] / 1e3 for x in v]
    print(f"rank {r}: {len(v)} CTAs, span {(t1 - t0) / 1e3:.1f} us, entry spread "
          f"{(max(x[1] for x in v) - t0) / 1e3:.1f} us, wait_a median {st.median(stall):.1f} "
          f"max {max(stall):.1f} us, waits/CTA {st.mean(x[4] for x in v):.1f}")
for r in sorted(kxa):
    s = " ".join(f"{k}{i}@{t:.0f}" for k, i, t in sorted(kxa[r], key=lambda z: z[2]))
    print(f"rank {r} arrivals: {s}")
