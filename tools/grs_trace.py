#!/usr/bin/env python3
"""grs_trace.py - summarize a lab build's trace of mkGemmReduceScatter /
mkGemmAllReduce (libmkcore built with -DMKI_GRS_TRACE=CALL, kernels/ops/
gemm_rs.cu): per rank, the distribution over CTAs of each stamp of that
call (us from the rank's earliest CTA start) and of each per-CTA sum
(us per CTA; counts as counts).

    python3 tools/grs_trace.py LOG [LOG ...]   (mkbench or test output)
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


def main(paths):
    for path in paths:
        stamps, sums = [], []
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


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__.strip())
        sys.exit(2)
    main(sys.argv[1:])
