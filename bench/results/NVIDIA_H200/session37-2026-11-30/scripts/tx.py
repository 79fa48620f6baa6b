"""s37 lab: the tx trace (TRACE, TX, TL lines with clocks) of one run: per rank, every CTA's SM,
its last tile's mainloop and SM clock, and what its exit waited for."""
import re, sys
def med(v):
    v = sorted(v); return v[len(v) // 2] if v else -1
for path in sys.argv[1:]:
    tr, tx, tl = {}, {}, {}
    for line in open(path, errors="replace"):
        if line.startswith("TRACE rank"):
            d = dict(re.findall(r"(\w+) (-?\d+)", line)); tr[(int(d["rank"]), int(d["cta"]))] = d
        elif line.startswith("TX "):
            m = re.match(r"TX (\d+) (\d+) smid (\d+) movers (-?\d+) prod (-?\d+) wg1 (-?\d+)\s*$", line)
            if m: tx[(int(m[1]), int(m[2]))] = tuple(int(x) for x in m.groups()[2:])
        elif line.startswith("TL "):
            t = line.split()
            if len(t) != 11: continue
            try: v = [int(x) for x in t[1:]]
            except ValueError: continue
            tl.setdefault((v[0], v[1]), {})[v[2]] = v[3:]
    print(path)
    t0s = sorted(int(d["t0"]) for d in tr.values())
    mid = t0s[len(t0s) // 2] if t0s else 0
    bad = {k for k, d in tr.items() if abs(int(d["t0"]) - mid) > 10**7}  # a garbled line
    for k in bad: del tr[k]
    for k in [k for k, d in tr.items() if not all(x in d for x in ("end", "summed", "done_in", "t0"))]: del tr[k]
    base = min(int(d["t0"]) for d in tr.values()) if tr else 0  # both ranks: one base (globaltimer)
    for r in (0, 1):
        ks = sorted(k for k in tr if k[0] == r)
        if not ks: continue
        print(" rank %d starts at %.1f us (common base)" % (r, (min(int(tr[k]["t0"]) for k in ks) - base) / 1e3))
        rows, mid_mhz, mid_ml = [], [], []
        for k in ks:
            a = int(tr[k]["t0"]) - base
            f = lambda ns: (a + ns) / 1e3 if ns >= 0 else -1
            its = sorted(tl.get(k, {}))
            for i in its[:-1]:
                kind, tin, tout, x0, x1, x2, cyc = tl[k][i]
                if x1 > x0: mid_mhz.append(cyc / ((x1 - x0) * 1.024)); mid_ml.append((x1 - x0) * 1.024)
            if not its: continue
            kind, tin, tout, x0, x1, x2, cyc = tl[k][its[-1]]
            ml = (x1 - x0) * 1.024
            mhz = cyc / ((x1 - x0) * 1.024) if x1 > x0 else -1
            sm, mv, pr, w1 = tx.get(k, (-1, -1, -1, -1))
            rows.append((f(int(tr[k]["end"])), k[1], sm, ml, mhz, f(x0 * 1024), f(x1 * 1024), f(int(tr[k]["summed"])), f(int(tr[k]["done_in"])), f(w1), f(mv), f(pr)))
        print(" rank %d: mid tiles: mainloop med %.1f us, SM clock med %.0f MHz (min %.0f)" % (r, med(mid_ml), med(mid_mhz), min(mid_mhz) if mid_mhz else -1))
        rows.sort()
        if rows:
            ends = [x[0] for x in rows]
            print(" rank %d summary: %d last tiles, %d over 100 us (max %.0f); CTA ends %.1f .. %.1f (median %.1f)" % (
                r, len(rows), sum(1 for x in rows if x[3] > 100), max(x[3] for x in rows), min(ends), max(ends), med(ends)))
        print("  end     cta smid  last_ml   MHz  ml_start  ml_end  summed  done_wg0 done_wg1 movers prod_last")
        n = len(rows)
        for j, x in enumerate(rows):
            if j < 3 or j >= n - 40 or x[3] > 90:
                print("  %7.1f %3d %4d %7.1f %5.0f %8.1f %7.1f %7.1f %8.1f %8.1f %7.1f %7.1f" % x)
            elif j == 3:
                print("  ...")
