"""s37 lab te2: TE lines with kind:first_stage:mainloop_end:moved:0 (moved: when the movers handed iteration it
back).  For peer tiles: the consumers' outbox wait at tile it = max(0, moved[it - 4] - mainloop_end[it])."""
import sys, statistics as st
for path in sys.argv[1:]:
    print(path)
    for r in (0, 1):
        waits, gaps, lag, copy = [], [], [], []
        for line in open(path, errors="replace"):
            t = line.split()
            if len(t) < 6 or t[0] != "TE" or t[1] != str(r): continue
            try: tiles = [tuple(int(y) for y in x.split(":")) for x in t[6:]]; end = int(t[5])
            except ValueError: continue
            if any(len(x) != 5 for x in tiles): continue
            for i, (k, a, b, mv, _) in enumerate(tiles):
                nxt = tiles[i + 1][1] if i + 1 < len(tiles) else end
                if k == 2:
                    w = max(0, tiles[i - 4][3] - b) / 1e3 if i >= 4 and tiles[i - 4][3] else 0.0
                    waits.append(w); gaps.append((nxt - b) / 1e3)
                    if mv: lag.append((mv - b) / 1e3)
        if not waits: continue
        q = lambda v, p: sorted(v)[int(p * (len(v) - 1))]
        print(" rank %d peer tiles %d: gap med %.1f p90 %.1f; outbox wait med %.1f p90 %.1f max %.1f us; "
              "copy handed back after the mainloop's end med %.1f p90 %.1f us" % (
                  r, len(waits), st.median(gaps), q(gaps, .9), st.median(waits), q(waits, .9), max(waits), st.median(lag), q(lag, .9)))
