#!/usr/bin/env python3
"""attn_sdpa.py - the attention forward of PyTorch's SDPA on one GPU, the
bar of `mkbench attn` (issue 21: the core alone at >= 0.95x cuDNN's
TFLOP/s).

    python3 bench/attn_sdpa.py --out FILE.json [--ours attn.json]
        [--shapes BxHxSxD,...] [--masks full,causal] [--kv-ratio R]
        [--layout bshd|bhsd] [--iters N] [--rounds R]

torch.nn.functional.scaled_dot_product_attention under
torch.nn.attention.sdpa_kernel with the cuDNN backend
(SDPBackend.CUDNN_ATTENTION) and with the flash backend
(SDPBackend.FLASH_ATTENTION), bf16, on mkbench attn's default shapes (B H S
= 16 x 16 x 4096, H = 2048 / D): random values in [-1, 1), q, k, v in
BSHD memory (FlashAttention's layout; --layout bhsd: contiguous B H S D)
passed as B H S D views, scale 1/sqrt(D).  Method as mkbench: the
backends take turns in R rounds (default 3) of N timed calls (default 10)
after warm-up calls, one CUDA event pair per call, inputs rotating over
sets whose bytes pass twice the L2; per backend the median.  FLOPs 4 B H
S^2 D, half under the causal mask.

A backend that this torch lacks, or that refuses the inputs, is reported
as SKIP with the reason (no cuDNN attention in the build, say); without
torch or a GPU the script says SKIP and writes an empty list.  --ours:
mkbench attn's JSON of the same run; the table then shows ours beside
cuDNN and the ratio.  Prints a table between "attn_sdpa: ..." and
"attn_sdpa: end" (tests/gpu/attn.sh copies it into its summary); writes
the records to --out.
"""
import argparse
import datetime
import json
import sys


def parse_shapes(text):
    out = []
    for item in text.split(","):
        b, h, s, d = (int(v) for v in item.lower().split("x"))
        out.append((b, h, s, d))
    return out


def flops(b, h, s, d, causal):
    return 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def skip_all(out, why):
    print("attn_sdpa: SKIP (%s)" % why)
    print("attn_sdpa: end")
    with open(out, "w") as f:
        json.dump([], f)
    return 0


def make_sets(torch, shape, kv_ratio, layout, l2):
    """Input sets (q, k, v as B H S D views) whose bytes pass twice the L2."""
    b, h, s, d = shape
    kvh = h // kv_ratio
    per = 2 * (b * s * d) * (2 * h + 2 * kvh)  # q, k, v, o in bf16
    n = max(1, min(8, -(-2 * l2 // per)))
    sets = []
    for i in range(n):
        g = torch.Generator(device="cuda").manual_seed(1000 + i)

        def rand(heads):
            if layout == "bshd":
                t = torch.rand((b, s, heads, d), device="cuda", generator=g) * 2 - 1
                return t.to(torch.bfloat16).transpose(1, 2)
            t = torch.rand((b, heads, s, d), device="cuda", generator=g) * 2 - 1
            return t.to(torch.bfloat16)

        sets.append((rand(h), rand(kvh), rand(kvh)))
    return sets


def call(torch, backend, qkv, causal, gqa):
    from torch.nn.attention import sdpa_kernel
    import torch.nn.functional as F
    q, k, v = qkv
    with sdpa_kernel(backend):
        if gqa:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def time_block(torch, backend, sets, causal, gqa, iters, warmup=3):
    for i in range(warmup):
        call(torch, backend, sets[i % len(sets)], causal, gqa)
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(iters)]
    for i, (a, z) in enumerate(ev):
        a.record()
        call(torch, backend, sets[i % len(sets)], causal, gqa)
        z.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(z) for a, z in ev]


def backends(torch):
    """(name, SDPBackend or None, why) for cuDNN and flash."""
    try:
        from torch.nn.attention import SDPBackend
    except ImportError as e:
        return [("cudnn", None, "torch.nn.attention: %s" % e), ("flash", None, "same")]
    out = []
    for name, attr in (("cudnn", "CUDNN_ATTENTION"), ("flash", "FLASH_ATTENTION")):
        be = getattr(SDPBackend, attr, None)
        out.append((name, be, None if be is not None else "SDPBackend.%s missing" % attr))
    return out


def try_backend(torch, be, qkv, causal, gqa):
    """None if the backend runs these inputs, else why not."""
    try:
        call(torch, be, qkv, causal, gqa)
        torch.cuda.synchronize()
        return None
    except (RuntimeError, TypeError, ValueError) as e:
        return str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__


def bench_shape(torch, shape, causal, args, l2, meta):
    b, h, s, d = shape
    gqa = args.kv_ratio > 1
    sets = make_sets(torch, shape, args.kv_ratio, args.layout, l2)
    live, recs = [], []
    for name, be, why in backends(torch):
        why = why or try_backend(torch, be, sets[0], causal, gqa)
        if why:
            print("attn_sdpa: %s %dx%dx%dx%d %s: SKIP (%s)" % (name, b, h, s, d,
                  "causal" if causal else "full", why))
            continue
        live.append((name, be))
    times = {name: [] for name, _ in live}
    for _ in range(args.rounds):  # the backends take turns
        for name, be in live:
            times[name] += time_block(torch, be, sets, causal, gqa, args.iters)
    for name, _ in live:
        ms = median(times[name])
        rec = dict(meta, op="sdpa", backend=name, batch=b, heads=h, kv_heads=h // args.kv_ratio,
                   seq=s, head_dim=d, mask="causal" if causal else "full", ms=round(ms, 4),
                   tflops=round(flops(b, h, s, d, causal) / ms * 1e-9, 2),
                   calls=len(times[name]))
        recs.append(rec)
    del sets
    torch.cuda.empty_cache()
    return recs


def load_ours(path):
    """mkbench attn's records by (batch, heads, seq, head_dim, mask)."""
    if not path:
        return {}
    try:
        with open(path) as f:
            recs = json.load(f)
    except (OSError, ValueError) as e:
        print("attn_sdpa: cannot read %s: %s" % (path, e))
        return {}
    out = {}
    for r in recs:
        if r.get("op") != "attn":
            continue
        key = (r.get("batch"), r.get("heads"), r.get("seq"), r.get("head_dim"), r.get("mask"))
        out[key] = r.get("tflops")
    return out


def print_table(recs, ours, device):
    print("attn_sdpa: %s, bf16, TFLOP/s (4 B H S^2 D, half when causal; median)" % device)
    print("%-20s %-7s %8s %8s %8s %10s" % ("B x H x S x D", "mask", "ours", "cudnn", "flash",
                                           "ours/cudnn"))
    keys = []
    for r in recs:
        k = (r["batch"], r["heads"], r["seq"], r["head_dim"], r["mask"])
        if k not in keys:
            keys.append(k)
    worst = None
    for k in keys:
        by = {r["backend"]: r["tflops"] for r in recs
              if (r["batch"], r["heads"], r["seq"], r["head_dim"], r["mask"]) == k}
        o = ours.get(k)
        c = by.get("cudnn")
        ratio = o / c if o and c else None
        if ratio is not None:
            worst = ratio if worst is None else min(worst, ratio)
        cell = lambda v, f="%.1f": f % v if v is not None else "-"
        print("%-20s %-7s %8s %8s %8s %10s" % ("x".join(str(v) for v in k[:4]), k[4], cell(o),
              cell(c), cell(by.get("flash")), cell(ratio, "%.3fx")))
    if worst is not None:
        print("attn_sdpa: ours/cudnn at least %.3fx (issue 21's bar: 0.95x) %s"
              % (worst, "ok" if worst >= 0.95 else "BELOW"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="JSON records written here")
    p.add_argument("--ours", help="mkbench attn's JSON, for the ratio")
    p.add_argument("--shapes", default="16x16x4096x128,4x16x16384x128,8x32x4096x64,2x32x16384x64")
    p.add_argument("--masks", default="full,causal")
    p.add_argument("--kv-ratio", type=int, default=1)
    p.add_argument("--layout", choices=("bshd", "bhsd"), default="bshd")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    try:
        shapes = parse_shapes(args.shapes)
        masks = [m for m in args.masks.split(",") if m]
        if any(m not in ("full", "causal") for m in masks) or args.iters < 1 or args.rounds < 1:
            raise ValueError(args.masks)
    except ValueError:
        p.error("bad --shapes, --masks (full,causal), --iters or --rounds")
    try:
        import torch
    except ImportError as e:
        return skip_all(args.out, "no torch: %s" % e)
    if not torch.cuda.is_available():
        return skip_all(args.out, "torch sees no GPU")
    prop = torch.cuda.get_device_properties(0)
    l2 = getattr(prop, "L2_cache_size", 50 << 20)
    meta = dict(dtype="bf16", layout=args.layout.upper(), device=prop.name,
                torch=torch.__version__,
                cudnn=str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available()
                else None,
                date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    print("attn_sdpa: torch %s, cuDNN %s, %s" % (meta["torch"], meta["cudnn"], prop.name))
    recs = []
    for shape in shapes:
        if shape[1] % args.kv_ratio:
            print("attn_sdpa: %s: heads not a multiple of --kv-ratio, skipped" % (shape,))
            continue
        for m in masks:
            recs += bench_shape(torch, shape, m == "causal", args, l2, meta)
    with open(args.out, "w") as f:
        json.dump(recs, f, indent=1)
    print_table(recs, load_ours(args.ours), prop.name)
    print("attn_sdpa: end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
