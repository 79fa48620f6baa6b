#!/usr/bin/env python3
"""grs_te.py - summarize the timeline of mkGemmReduceScatter's last call
in a lab build with -DMKI_GRS_TE (kernels/ops/gemm_rs_te.cuh; TE lines,
printed at mkCommDestroy): per rank, each kind of tile's mainloop (the
consumers' first full stage to its end) and the time from its end to the
next tile's first full stage (or to the CTA's end): the epilogue and
hand-over that the mainloop does not hide, and where the producer issued
the next tile's first load within it; the CTAs' first stage after
their start, their ends (us from the rank's earliest CTA start), and
their last tiles against the others.

This build's kernels are the normal build's (same ptxas summary), so
these times are the library's; the trace build's (-DMKI_GRS_TRACE,
tools/grs_trace.py) are not (bench/NOTES.md, thirty-seventh session).

    python3 tools/grs_te.py LOG [LOG ...]   (mkbench or test output)
"""
import sys

KINDS = {1: "own", 2: "peer", 0: "K-slice"}  # 0: no movers, no kind recorded


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def parse(path):
    ctas = {}
    with open(path, errors="replace") as f:
        for line in f:
            t = line.split()
            if len(t) < 6 or t[0] != "TE":
                continue
            try:
                rank, cta, sm, start, end = (int(x) for x in t[1:6])
                tiles = [tuple(int(y) for y in x.split(":")) for x in t[6:]]
            except ValueError:
                continue  # interleaved output
            if any(len(x) not in (3, 4) for x in tiles):
                continue
            tiles = [x if len(x) == 4 else x + (0,) for x in tiles]
            ctas[(rank, cta)] = (sm, start, end, tiles)
    return ctas


def main(paths):
    for path in paths:
        ctas = parse(path)
        print(path)
        for r in sorted({k[0] for k in ctas}):
            ks = [k for k in ctas if k[0] == r]
            base = min(ctas[k][1] for k in ks)
            ml, gap, first, ends, last, mid = {}, {}, [], [], [], []
            issue, wait = {}, {}
            for k in ks:
                sm, start, end, tiles = ctas[k]
                if not tiles:
                    continue
                first.append((tiles[0][1] - start) / 1e3)
                ends.append((end - base) / 1e3)
                for i, (kind, a, b, _) in enumerate(tiles):
                    nxt = tiles[i + 1][1] if i + 1 < len(tiles) else end
                    ml.setdefault(kind, []).append((b - a) / 1e3)
                    gap.setdefault(kind, []).append((nxt - b) / 1e3)
                    if i + 1 < len(tiles) and tiles[i + 1][3]:
                        # the next tile's first load: issued how long after this mainloop's
                        # end (negative: before), and from it to the next first full stage
                        issue.setdefault(kind, []).append((tiles[i + 1][3] - b) / 1e3)
                        wait.setdefault(kind, []).append((tiles[i + 1][1] - tiles[i + 1][3]) / 1e3)
                    (last if i + 1 == len(tiles) else mid).append((b - a) / 1e3)
            print(" rank %d: %d CTAs, %d tiles; first full stage %.1f us after the CTA's start "
                  "(median); CTA ends %.1f / %.1f / %.1f us (first / median / last)" % (
                      r, len(ks), len(mid) + len(last), pct(first, 0.5), min(ends),
                      pct(ends, 0.5), max(ends)))
            for kind in sorted(ml):
                print("  %-9s tiles %5d: mainloop median %6.1f p90 %6.1f us; then to the next "
                      "tile's first stage median %5.1f p90 %5.1f us" % (
                          KINDS.get(kind, str(kind)), len(ml[kind]), pct(ml[kind], 0.5),
                          pct(ml[kind], 0.9), pct(gap[kind], 0.5), pct(gap[kind], 0.9)))
                if issue.get(kind):
                    print("            the next tile's first load issued %+.1f us from the "
                          "mainloop's end (median), %.1f us before its first full stage" % (
                              pct(issue[kind], 0.5), pct(wait[kind], 0.5)))
            m = pct(mid, 0.5)
            print("  last tiles: mainloop median %.1f max %.1f us, %d over 1.5x the others' "
                  "median (%.1f)" % (pct(last, 0.5), max(last), sum(x > 1.5 * m for x in last), m))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__.strip())
        sys.exit(2)
    main(sys.argv[1:])
