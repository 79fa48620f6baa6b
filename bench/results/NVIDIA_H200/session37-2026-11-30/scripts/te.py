"""s37 lab te: per-CTA start/end and tiles' mainloops of a normal build's last call (TE lines)."""
import sys
def med(v):
    v = sorted(v); return v[len(v) // 2] if v else -1
for path in sys.argv[1:]:
    ctas = {}
    for line in open(path, errors="replace"):
        if not line.startswith("TE ") or "copy failed" in line: continue
        t = line.split()
        try:
            r, c = int(t[1]), int(t[2]); sm, st, en = int(t[4]), int(t[6]), int(t[8])
            tl = [tuple(int(y) for y in x.split(":")) for x in t[9:]]
        except (ValueError, IndexError):
            continue
        ctas[(r, c)] = (sm, st, en, tl)
    print(path)
    for r in (0, 1):
        ks = [k for k in ctas if k[0] == r]
        if not ks: continue
        base = min(ctas[k][1] for k in ks)
        mid, last, ends, slow = [], [], [], []
        for k in ks:
            sm, st, en, tl = ctas[k]
            if not tl: continue
            for a, b in tl[:-1]: mid.append((b - a) / 1e3)
            a, b = tl[-1]
            last.append((b - a) / 1e3); ends.append((en - base) / 1e3)
            if (b - a) / 1e3 > 100: slow.append(((b - a) / 1e3, k[1], sm, (a - base) / 1e3, (b - base) / 1e3))
        slow.sort(reverse=True)
        print(" rank %d: %d CTAs; mainloop mid med %.1f max %.1f; last med %.1f max %.1f, %d over 100 us; "
              "CTA ends %.1f / %.1f / %.1f us (min / med / max)" % (r, len(ks), med(mid), max(mid), med(last), max(last), len(slow), min(ends), med(ends), max(ends)))
        for x in slow[:4]:
            print("   slow last: %.1f us cta %d sm %d (%.1f -> %.1f)" % x)
