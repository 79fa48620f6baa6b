#!/usr/bin/env python3
"""attn_sdpa.py - the attention forward of PyTorch's SDPA on one GPU, the
bar of `mkbench attn` (issue 21: the core alone at >= 0.95x cuDNN's
TFLOP/s).

    python3 bench/attn_sdpa.py --out FILE.json [--ours attn.json]
        [--core libmkb_attn_core.so] [--shapes BxHxSxD,...]
        [--masks full,causal] [--kv-ratio R] [--layout bshd|bhsd]
        [--iters N] [--rounds R]

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

--core: our attention core (mki_attn_run) as a shared library
(tools/mkbench/attn_core_shim.cu, built by tests/gpu/attn.sh build): it
then takes its turn with the two backends on the same inputs (its output
checked against cuDNN's on the first set), and the SM clock at the end of
each backend's last block is shown (MHz): under the H200's power cap a
kernel's clock depends on what ran just before it, so a ratio between
programs run one after the other (ours from mkbench, --ours) can differ
from the ratio in turns by several percent.  The ratio ours/cudnn is the
one in turns when --core is given, else mkbench's.

A backend that this torch lacks, or that refuses the inputs, is reported
as SKIP with the reason (no cuDNN attention in the build, say); without
torch or a GPU the script says SKIP and writes an empty list.  --ours:
mkbench attn's JSON of the same run; the table then shows ours beside
cuDNN and the ratio.  Prints a table between "attn_sdpa: ..." and
"attn_sdpa: end" (tests/gpu/attn.sh copies it into its summary); writes
the records to --out.
"""
import argparse
import ctypes
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


class Core:
    """Our core through libmkb_attn_core.so, called like a backend."""

    def __init__(self, path, layout):
        self.lib = ctypes.CDLL(path)
        f = self.lib.mkb_attn_core
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_void_p] + [ctypes.c_longlong] * 5 + \
            [ctypes.c_int] * 3 + [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        self.lib.mkb_attn_sm_mhz.restype = ctypes.c_double
        self.lib.mkb_attn_sm_mhz.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.layout = 0 if layout == "bshd" else 1
        self.outs = {}

    def run(self, torch, qkv, causal):
        q, k, v = qkv  # B H S D views of BSHD (or BHSD) storage
        b, h, s, d = q.shape
        if id(q) not in self.outs:  # o in q's memory order, lse [B, H, S]
            self.outs[id(q)] = (torch.empty_like(q), torch.empty((b, h, s), device="cuda",
                                                                 dtype=torch.float32))
        o, lse = self.outs[id(q)]
        msg = ctypes.create_string_buffer(256)
        r = self.lib.mkb_attn_core(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                                   ctypes.c_void_p(lse.data_ptr()), b, s, h, k.shape[1], d,
                                   int(causal), self.layout, 0,
                                   torch.cuda.current_stream().cuda_stream, msg, 256)
        if r:
            raise RuntimeError("mkb_attn_core: %s (%d)" % (msg.value.decode(), r))
        return o

    def mhz(self, torch):
        return self.lib.mkb_attn_sm_mhz(torch.cuda.current_stream().cuda_stream, 200)


def call(torch, backend, qkv, causal, gqa):
    if isinstance(backend, Core):
        return backend.run(torch, qkv, causal)
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


def bench_shape(torch, shape, causal, args, l2, meta, core):
    b, h, s, d = shape
    gqa = args.kv_ratio > 1
    sets = make_sets(torch, shape, args.kv_ratio, args.layout, l2)
    live, recs = [], []
    mine = [("ours", core, None)] if core else []
    for name, be, why in mine + backends(torch):
        why = why or try_backend(torch, be, sets[0], causal, gqa)
        if why:
            print("attn_sdpa: %s %dx%dx%dx%d %s: SKIP (%s)" % (name, b, h, s, d,
                  "causal" if causal else "full", why))
            continue
        live.append((name, be))
    diff = None
    names = [n for n, _ in live]
    if "ours" in names and "cudnn" in names:  # a sanity check of the pairing, not the test
        be = dict(live)
        ref = call(torch, be["cudnn"], sets[0], causal, gqa).float()
        diff = (call(torch, core, sets[0], causal, gqa).float() - ref).abs().max().item()
    times = {name: [] for name, _ in live}
    mhz = {}
    for r in range(args.rounds):  # the backends take turns
        for name, be in live:
            times[name] += time_block(torch, be, sets, causal, gqa, args.iters)
            if core and r == args.rounds - 1:  # the clock each one's last block ended at
                mhz[name] = round(core.mhz(torch))
    for name, _ in live:
        ms = median(times[name])
        rec = dict(meta, op="sdpa", backend=name, batch=b, heads=h, kv_heads=h // args.kv_ratio,
                   seq=s, head_dim=d, mask="causal" if causal else "full", ms=round(ms, 4),
                   tflops=round(flops(b, h, s, d, causal) / ms * 1e-9, 2),
                   calls=len(times[name]), sm_mhz=mhz.get(name))
        if name == "ours":
            rec["max_diff_vs_cudnn"] = diff
        recs.append(rec)
    if core:
        core.outs.clear()
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
    """ours: mkbench's TFLOP/s by shape (--ours); the in-turn "ours" records
    (--core), when present, give the ratio."""
    print("attn_sdpa: %s, bf16, TFLOP/s (4 B H S^2 D, half when causal; median)" % device)
    print("%-20s %-7s %8s %8s %8s %8s %10s  %-16s %s" % ("B x H x S x D", "mask", "ours", "mkbench",
                                                       "cudnn", "flash", "ours/cudnn",
                                                       "MHz ours/cudnn", "|o - cudnn|"))
    keys = []
    for r in recs:
        k = (r["batch"], r["heads"], r["seq"], r["head_dim"], r["mask"])
        if k not in keys:
            keys.append(k)
    worst = None
    for k in keys:
        mine = [r for r in recs if (r["batch"], r["heads"], r["seq"], r["head_dim"], r["mask"]) == k]
        by = {r["backend"]: r["tflops"] for r in mine}
        clk = {r["backend"]: r.get("sm_mhz") for r in mine}
        dif = [r.get("max_diff_vs_cudnn") for r in mine if r["backend"] == "ours"]
        o = by.get("ours", ours.get(k))
        c = by.get("cudnn")
        ratio = o / c if o and c else None
        if ratio is not None:
            worst = ratio if worst is None else min(worst, ratio)
        cell = lambda v, f="%.1f": f % v if v is not None else "-"
        print("%-20s %-7s %8s %8s %8s %8s %10s  %-16s %s" % (
            "x".join(str(v) for v in k[:4]), k[4], cell(by.get("ours")), cell(ours.get(k)), cell(c),
            cell(by.get("flash")), cell(ratio, "%.3fx"),
            "%s/%s" % (cell(clk.get("ours"), "%d"), cell(clk.get("cudnn"), "%d")),
            cell(dif[0] if dif else None, "%.3g")))
    if worst is not None:
        print("attn_sdpa: ours/cudnn at least %.3fx (issue 21's bar: 0.95x) %s"
              % (worst, "ok" if worst >= 0.95 else "BELOW"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="JSON records written here")
    p.add_argument("--ours", help="mkbench attn's JSON, shown beside")
    p.add_argument("--core", help="libmkb_attn_core.so: our core in turns with the backends")
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
    core = None
    if args.core:
        try:
            core = Core(args.core, args.layout)
        except OSError as e:
            print("attn_sdpa: ours: SKIP (cannot load %s: %s)" % (args.core, e))
    recs = []
    for shape in shapes:
        if shape[1] % args.kv_ratio:
            print("attn_sdpa: %s: heads not a multiple of --kv-ratio, skipped" % (shape,))
            continue
        for m in masks:
            recs += bench_shape(torch, shape, m == "causal", args, l2, meta, core)
    with open(args.out, "w") as f:
        json.dump(recs, f, indent=1)
    print_table(recs, load_ours(args.ours), prop.name)
    print("attn_sdpa: end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
