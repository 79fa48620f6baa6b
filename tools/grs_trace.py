#!/usr/bin/env python3
"""grs_trace.py - summarize a lab build's trace of mkGemmReduceScatter /
mkGemmAllReduce (libmkcore built with -DMKI_GRS_TRACE=CALL, kernels/ops/
gemm_rs.cu): per rank, the distribution over CTAs of each stamp of that
call (us from the rank's earliest CTA start) and of each per-CTA sum
(us per CTA; counts as counts); and from the per-tile timeline (TL
lines: each tile's epilogue entry and combine end, the consumers' first
full stage and mainloop end, the producer's first load), the mainloop's
time (first full stage to its end) of the CTAs' last tiles against all
others, and the slowest last tiles.

    python3 tools/grs_trace.py LOG [LOG ...]   (mkbench or test output)

The trace build's kernels spill (112-160 byte stack frames): they run
~15% long, and their last tiles crawl (mainloops of 150-600 us) where
the normal build's do not.  For times, use the -DMKI_GRS_TE build and
tools/grs_te.py (bench/NOTES.md, thirty-seventh session).
"""
import sys

STAMPS = ("comb_in", "comb_ok", "summed", "stored", "bcast", "done_in", "end")
SUMS = ("own", "peer", "own_period", "peer_period", "flagwait", "combine", "outbox",
        "mv_wait", "mv_copy")


def fields(line, n):
    t = line.split()
    if len(t) != n:
        return None  # interleaved output of two CTAs: skipped
    return {t[i]: t[i + 1] for i in range(1, n - 1, 2)}


def dist(v):
    if not v:
        return "-"
    v = sorted(v)
    return "n %3d  min %8.1f  med %8.1f  max %8.1f" % (len(v), v[0], v[len(v) // 2], v[-1])


def timeline(tl, r):
    """The mainloops of rank r's tiles (us): the last tile of each CTA
    against the others, and the five slowest last tiles."""
    last, mid, slow = [], [], []
    for (rank, cta), tiles in tl.items():
        if rank != r:
            continue
        end = max(tiles)
        for i, (kind, t_in, t_out, full, ml_end, prod) in tiles.items():
            if full == 0 or ml_end < full:
                continue
            (last if i == end else mid).append(ml_end - full)
            if i == end:
                prev = tiles[i - 1][2] if i - 1 in tiles else 0.0
                slow.append((ml_end - full, cta, i, prev, prod, full, ml_end, t_in, t_out))
    if not last:
        return
    print("  mainloop mid  %s" % dist(mid))
    print("  mainloop last %s" % dist(last))
    slow.sort(reverse=True)
    for x in slow[:5]:
        print("   slow last tile: %6.1f us  cta %3d tile %2d  (previous epilogue done %7.1f,"
              " first load %7.1f, first stage %7.1f, mainloop end %7.1f, epilogue %7.1f,"
              " combined %7.1f)" % x)


def main(paths):
    for path in paths:
        stamps, sums = [], []
        tl = {}
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("TRACE rank"):
                    d = fields(line, 27)
                    if d:
                        stamps.append(d)
                elif line.startswith("TRACESUM rank"):
                    d = fields(line, 23)
                    if d:
                        sums.append(d)
                elif line.startswith("TL "):
                    t = line.split()
                    if len(t) != 10:
                        continue  # interleaved output
                    rank, cta, i, kind = (int(x) for x in t[1:5])
                    us = [int(x) * 1.024 for x in t[5:]]  # ns >> 10
                    tl.setdefault((str(rank), cta), {})[i] = (kind, *us)
        print(path)
        for r in sorted({d["rank"] for d in stamps + sums}):
            rs = [d for d in stamps if d["rank"] == r]
            print(" rank %s: %d CTAs traced" % (r, len(rs)))
            if rs:
                t0 = min(int(d["t0"]) for d in rs)
                for k in STAMPS:
                    v = [(int(d["t0"]) - t0 + int(d[k])) / 1e3 for d in rs
                         if k in d and int(d[k]) >= 0]
                    print("  %-12s %s" % (k, dist(v)))
            ss = [d for d in sums if d["rank"] == r]
            for k in SUMS:
                if not ss:
                    break
                scale = 1.0 if k in ("own", "peer") else 1e-3
                print("  sum %-8s %s" % (k, dist([int(d[k]) * scale for d in ss])))
            timeline(tl, r)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__.strip())
        sys.exit(2)
    main(sys.argv[1:])
