#!/usr/bin/env python3
"""model_check.py - the plan's predicted time next to the time mkbench measured.

    python3 tools/model_check.py [--mkinfo PATH] [--tol F] [--device S] [--check] JSON...

For every record of mkbench's JSON files (mkbench coll, ag_gemm, gemm_rs,
gemm_ar, attn, ring_attn) it asks mkinfo for the plan of the same operation, shape, dtype
and layout (ranks per node, nodes) and prints the model's time of the path
the plan picks (fused or unfused) beside the measured one.  mkinfo plans
for the GPUs of the machine it runs on, or, without a GPU, for 132-SM
H200s joined by NV18 (REFERENCE.md): compare with records of the same GPU
(--device, default "H200"; "" keeps all).  Records the model does not
describe are skipped (zero-copy collectives, the copy-engine all-gather
sweep).  The MoE calls (mkbench moe): mkinfo's m, n, k = tokens, hidden,
top-k, and for mkMoEDispatchGemm and the layer --experts and --gemm-n (the
first GEMM's columns: the record's N, or 2 x inter).

Collective sizes, as mkbench coll writes them (bytes per rank), become the
plan's element counts: all-gather and all-to-all P * bytes (the whole
output / send buffer), reduce-scatter P * bytes (the whole input),
all-reduce bytes.  Attention (mkbench attn: the core alone, one rank;
ring_attn): the plan of ring_attn (m = seq_local, n = heads x head_dim, k
= kv_heads x head_dim, with the record's head_dim and mask) is one batch
element's: the prediction is its time times the batch.

--check exits 1 when a record's error |measured / predicted - 1| exceeds
--tol (default 0.15); otherwise the exit status is 0 and the table says.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

COLL = {"allgather", "reducescatter", "allreduce", "alltoall"}
GEMM = {"ag_gemm", "gemm_rs", "gemm_ar"}
ATTN = {"attn", "ring_attn"}
MOE = {"moe_dispatch", "moe_combine"}  # (m, n, k) = tokens, hidden, top-k
MOE_GEMM = {"moe_dispatch_gemm", "moe_layer"}  # the same, with --experts and --gemm-n
MODEL_RE = re.compile(r"model\s+compute (\S+) us, intra (\S+) us, inter (\S+) us; "
                      r"fused (\S+) us, unfused (\S+) us")
DECISION_RE = re.compile(r"decision\s+(fused|unfused)")


def plan(mkinfo, op, m, n, k, dtype, rpn, nodes, extra=()):
    args = [mkinfo, "--op", op, "--m", str(m), "--n", str(n), "--dtype", dtype,
            "--ranks", str(rpn), "--nodes", str(nodes)] + list(extra)
    if op in GEMM or op in MOE or op in MOE_GEMM or op == "ring_attn":
        args += ["--k", str(k)]
    out = subprocess.run(args, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(args), out.stderr.strip()))
    mm = MODEL_RE.search(out.stdout)
    dm = DECISION_RE.search(out.stdout)
    if not mm or not dm:
        raise RuntimeError("%s: no model line in its output" % " ".join(args))
    fused, unfused = float(mm.group(4)), float(mm.group(5))
    return dm.group(1), (fused if dm.group(1) == "fused" else unfused) / 1e3, \
        float(mm.group(1)) / 1e3


def attn_plan(mkinfo, r, rpn, nodes):
    """The model's time of an attention record (module doc), in ms."""
    d, h, kvh = int(r["head_dim"]), int(r["heads"]), int(r["kv_heads"])
    dec, t, _ = plan(mkinfo, "ring_attn", int(r["seq_local"]), h * d, kvh * d,
                     r.get("dtype", "bf16"), rpn, nodes,
                     ["--head-dim", str(d), "--mask", r.get("mask", "full")])
    return dec, t * int(r.get("batch", 1))


def shape_of(r):
    op, P = r["op"], int(r["world_size"])
    es = 4 if r.get("dtype") == "fp32" else 2
    if op in COLL:
        b = int(r["bytes"])
        elems = b // es if op == "allreduce" else P * b // es
        return elems, 1, 0, "%d B" % b
    if op in ATTN:
        return 0, 0, 0, "%dx%dx%dx%d %s" % (r["batch"], r["heads"], r["seq"], r["head_dim"],
                                            r.get("mask", "full")[:6])
    return int(r["m"]), int(r["n"]), int(r["k"]), "%dx%dx%d" % (r["m"], r["n"], r["k"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+")
    ap.add_argument("--mkinfo", default=os.environ.get("MKINFO", "build/tools/mkinfo"))
    ap.add_argument("--tol", type=float, default=0.15)
    ap.add_argument("--device", default="H200")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    rows, skipped = [], 0
    for path in a.json:
        with open(path) as f:
            recs = json.load(f)
        for r in recs if isinstance(recs, list) else [recs]:
            op = r.get("op")
            if (op not in COLL and op not in GEMM and op not in ATTN and op not in MOE and
                op not in MOE_GEMM) or \
               r.get("zero_copy") or \
               r.get("ours_ms") is None or a.device not in r.get("device", ""):
                skipped += 1
                continue
            P, nodes = int(r["world_size"]), int(r.get("nodes", 1))
            m, n, k, label = shape_of(r)
            if op in ATTN:
                dec, pred = attn_plan(a.mkinfo, r, P // nodes, nodes)
            elif op in MOE_GEMM:
                # mkbench moe: dispatch + GEMM m, n, k = tokens, N, hidden; the
                # layer tokens, hidden, inter
                gn = int(r["n"]) if op == "moe_dispatch_gemm" else 2 * int(r["k"])
                label = "%dx%dx%d/%d %s" % (r["m"], r["hidden"], r["experts"], r["topk"],
                                            r.get("routing", "")[:6])
                dec, pred, _ = plan(a.mkinfo, op, int(r["m"]), int(r["hidden"]), int(r["topk"]),
                                    r.get("dtype", "bf16"), P // nodes, nodes,
                                    ["--experts", str(r["experts"]), "--gemm-n", str(gn)])
            else:
                dec, pred, _ = plan(a.mkinfo, op, m, n, k, r.get("dtype", "bf16"), P // nodes,
                                    nodes)
            meas = float(r["ours_ms"])
            rows.append((os.path.basename(path), op, P, nodes, label, dec, meas, pred,
                         meas / pred - 1 if pred > 0 else float("inf")))
    if not rows:
        print("model_check: no record to compare (%d skipped)" % skipped)
        return 0
    print("%-22s %-14s %3s %5s %-24s %-8s %10s %10s %8s" %
          ("file", "op", "P", "nodes", "shape / bytes", "plan", "meas_ms", "pred_ms", "error"))
    for f, op, P, nodes, label, dec, meas, pred, err in rows:
        flag = "" if abs(err) <= a.tol else "  *"
        print("%-22s %-14s %3d %5d %-24s %-8s %10.4f %10.4f %+7.1f%%%s" %
              (f[:22], op, P, nodes, label, dec, meas, pred, 100 * err, flag))
    errs = [abs(r[8]) for r in rows]
    bad = sum(e > a.tol for e in errs)
    print("%d records (%d skipped): |error| median %.1f%%, max %.1f%%; %d beyond %.0f%% (*)" %
          (len(rows), skipped, 100 * statistics.median(errs), 100 * max(errs), bad,
           100 * a.tol))
    return 1 if a.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())
