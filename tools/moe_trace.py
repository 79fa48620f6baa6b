#!/usr/bin/env python3
"""moe_trace.py LOG... - read the "MKT" lines of a lab build of the MoE
kernels (-DMKI_MOE_TRACE, e.g. MK_BUILD_TREE=build-gpu/kt-build
MK_BUILD_DEFS=-DMKI_MOE_TRACE MK_GPU_MOE=build-gpu/moe-kt bash
tests/gpu/moe.sh build) from `mkbench moe --layer` and print, per rank and
per block of calls (a shape: calls less than 50 ms apart), the medians of
where mkMoEDispatchFfnCombine's time goes: the first kernel (dispatch, both
GEMMs) from its first CTA's entry to the end of the dispatch prologue in
its last CTA and to its last CTA's exit; the gap to the combine's entry;
the combine's first wait for a peer passed (last CTA), its first and last
CTA out; the whole layer.  Times of one rank only are compared (the GPUs'
globaltimers are not one clock)."""
import collections
import re
import statistics
import sys

LINE = re.compile(r"MKT ([LC]) rank (\d+) call (\d+) t0 (\d+) entry_max \S+ pro (\S+) (\S+) "
                  r"end (\S+) (\S+)")


def main(paths):
    kern = collections.defaultdict(list)  # (path, kind, rank) -> [(t0, pro_max, end_min, end_max)]
    for path in paths:
        with open(path, errors="replace") as f:
            for line in f:
                m = LINE.search(line)
                if m:
                    k, r, _, t0, _, pmax, emin, emax = m.groups()
                    kern[(path, k, int(r))].append((int(t0), float(pmax), float(emin), float(emax)))
    if not kern:
        sys.exit("moe_trace.py: no MKT lines (a build with -DMKI_MOE_TRACE?)")
    print("%-6s %5s %4s | %9s %9s | %6s | %9s %9s %9s | %9s" %
          ("rank", "block", "n", "L disp", "L end", "gap", "C wait", "C first", "C last", "layer"))
    for (path, k, r) in sorted(kern):
        if k != "L":
            continue
        ls = sorted(kern[(path, "L", r)])
        cs = sorted(kern.get((path, "C", r), []))
        blocks, cur, prev = [], [], None
        for l in ls:
            if prev is not None and l[0] - prev > 50e6:
                blocks.append(cur)
                cur = []
            cur.append(l)
            prev = l[0]
        blocks.append(cur)
        for bi, blk in enumerate(blocks):
            rows = []
            for l in blk:
                after = [c for c in cs if c[0] > l[0]]
                if not after:
                    continue
                c = after[0]
                start = (c[0] - l[0]) / 1e3  # the combine's entry, us after the layer's
                rows.append((l[1], l[3], start - l[3], c[1], c[2], c[3], start + c[3]))
            if not rows:
                continue
            med = [statistics.median(x) for x in zip(*rows)]
            print("%-6d %5d %4d | %9.0f %9.0f | %6.0f | %9.0f %9.0f %9.0f | %9.0f" %
                  (r, bi, len(rows), *med))
    print("(us: L disp / L end: the first kernel's dispatch prologue and last CTA out after its "
          "entry; gap: to the combine's entry; C: after the combine's entry)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
