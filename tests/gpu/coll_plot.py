"""Plot mkbench coll JSON: bus bandwidth vs size (ours and NCCL) per op, and
all-gather bus bandwidth vs CTAs (and on the copy engines).  Usage: coll_plot.py coll.json coll.png"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

recs = json.load(open(sys.argv[1]))
ops = [o for o in ("allgather", "reducescatter", "allreduce", "alltoall")
       if any(r["op"] == o for r in recs)]
sweep = [r for r in recs if r["op"].startswith("allgather_ctas")]
fig, axes = plt.subplots(1, len(ops) + (1 if sweep else 0),
                         figsize=(4.5 * (len(ops) + 1), 4), squeeze=False)
for ax, op in zip(axes[0], ops):
    rs = sorted((r for r in recs if r["op"] == op), key=lambda r: r["bytes"])
    x = [r["bytes"] / 2**20 for r in rs]
    ax.plot(x, [r["busbw_gbs"] for r in rs], "o-", label="mkernel")
    ax.plot(x, [r["baseline_busbw_gbs"] or 0 for r in rs], "s--",
            label=rs[0]["baseline"] if rs else "nccl")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("MB per rank")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title("%s %s, %d ranks" % (op, rs[0]["dtype"], rs[0]["world_size"]))
    ax.grid(True, alpha=0.3)
    ax.legend()
if sweep:
    ax = axes[0][-1]
    for name in sorted({r["op"] for r in sweep}):
        rs = sorted((r for r in sweep if r["op"] == name), key=lambda r: r["ctas"])
        ax.plot([r["ctas"] for r in rs], [r["busbw_gbs"] for r in rs], "o-",
                label=name.replace("allgather_ctas_", ""))
    for r in recs:
        if r["op"] == "allgather_ce":  # copy engines, no CTA
            ax.axhline(r["busbw_gbs"], color="gray", linestyle="--",
                       label="copy engine, 0 CTAs (%.0f)" % r["busbw_gbs"])
    ax.set_xscale("log", base=2)
    ax.set_xlabel("CTAs")
    ax.set_ylabel("all-gather bus bandwidth (GB/s)")
    ax.set_title("all-gather %d MB/rank vs CTAs" % (sweep[0]["bytes"] >> 20))
    ax.grid(True, alpha=0.3)
    ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
