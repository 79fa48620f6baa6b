#!/bin/bash
# Plot an mkbench coll JSON with gnuplot (no matplotlib needed): bus
# bandwidth against size per operation, ours and NCCL.
#   bash tests/gpu/coll_plot.sh coll.json coll.png [TITLE]
set -eu
in=$1 out=$2 title=${3:-}
tsv=$(mktemp)
trap 'rm -f "$tsv"' EXIT
python3 - "$in" > "$tsv" <<'PY'
import json, sys
recs = json.load(open(sys.argv[1]))
for op in ("allgather", "reducescatter", "allreduce", "alltoall"):
    rs = sorted((r for r in recs if r["op"] == op), key=lambda r: r["bytes"])
    if not rs:
        continue
    print(f"# {op}")
    for r in rs:
        print(r["bytes"] / 2**20, r["busbw_gbs"], r.get("baseline_busbw_gbs") or "NaN")
    print("\n")
PY
gnuplot -e "in='$tsv'; out='$out'; ttl='$title'" - <<'GP'
set terminal pngcairo size 1600,450 font ",10" noenhanced
set output out
set multiplot layout 1,4 title ttl
set logscale x 2
set xlabel "MB per rank"
set ylabel "bus bandwidth GB/s"
set yrange [0:*]
set grid
set title "all-gather"
plot in index 0 using 1:2 with linespoints pt 7 title "mkernel", '' index 0 using 1:3 with linespoints pt 5 title "NCCL"
set title "reduce-scatter"
plot in index 1 using 1:2 with linespoints pt 7 title "mkernel", '' index 1 using 1:3 with linespoints pt 5 title "NCCL"
set title "all-reduce"
plot in index 2 using 1:2 with linespoints pt 7 title "mkernel", '' index 2 using 1:3 with linespoints pt 5 title "NCCL"
set title "all-to-all"
plot in index 3 using 1:2 with linespoints pt 7 title "mkernel", '' index 3 using 1:3 with linespoints pt 5 title "NCCL"
unset multiplot
GP
