#!/bin/bash
# Plot an mkbench coll JSON with gnuplot (no matplotlib needed): bus
# bandwidth against size per operation, ours and NCCL; one panel for
# each operation the JSON holds.
#   bash tests/gpu/coll_plot.sh coll.json coll.png [TITLE]
set -eu
in=$1 out=$2 title=${3:-}
tsv=$(mktemp)
trap 'rm -f "$tsv"' EXIT
# The data blocks (one per operation present, in this order) go to
# $tsv; the names of those operations come back on stdout.
ops=$(python3 - "$in" "$tsv" <<'PY'
import json, sys
recs = json.load(open(sys.argv[1]))
names = []
with open(sys.argv[2], "w") as f:
    for op in ("allgather", "reducescatter", "allreduce", "alltoall"):
        rs = sorted((r for r in recs if r["op"] == op), key=lambda r: r["bytes"])
        if not rs:
            continue
        names.append(op)
        f.write(f"# {op}\n")
        for r in rs:
            f.write(f'{r["bytes"] / 2**20} {r["busbw_gbs"]} {r.get("baseline_busbw_gbs") or "NaN"}\n')
        f.write("\n\n")
print(" ".join(names))
PY
)
[ -n "$ops" ] || { echo "coll_plot.sh: no collective records in $in" >&2; exit 1; }
set -- $ops
n=$#
plots=""
i=0
for op in $ops; do
    case $op in
    allgather) t=all-gather ;; reducescatter) t=reduce-scatter ;;
    allreduce) t=all-reduce ;; *) t=all-to-all ;;
    esac
    plots="$plots
set title \"$t\"
plot in index $i using 1:2 with linespoints pt 7 title \"mkernel\", '' index $i using 1:3 with linespoints pt 5 title \"NCCL\""
    i=$((i + 1))
done
gnuplot -e "in='$tsv'; out='$out'; ttl='$title'" - <<GP
set terminal pngcairo size $((400 * n)),450 font ",10" noenhanced
set output out
set multiplot layout 1,$n title ttl
set logscale x 2
set xlabel "MB per rank"
set ylabel "bus bandwidth GB/s"
set yrange [0:*]
set grid
$plots
unset multiplot
GP
