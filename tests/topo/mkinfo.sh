#!/bin/sh
# mkinfo.sh - mkinfo's topology and plan output on this GPU-less host and
# on a fixture (tests/xml/dgx-h100.xml with fake GPUs), and its refusals.
builddir=${top_builddir:-.}
srcdir=${top_srcdir:-.}
mkinfo=$builddir/tools/mkinfo
[ -x "$mkinfo" ] || { echo "SKIP: $mkinfo is not built"; exit 77; }
unset MK_TOPO_XML MK_TOPO_FAKE_GPUS MK_SM_SPLIT MK_NET_DEVICES

passed=0 failed=0
expect() {  # description, pattern, output
    if printf '%s\n' "$3" | grep -q -- "$2"; then
        passed=$((passed + 1))
    else
        echo "FAIL: $1: no \"$2\" in:"; printf '%s\n' "$3" | sed 's/^/    /'
        failed=$((failed + 1))
    fi
}

out=$("$mkinfo" --topo 2>&1)
expect "--topo without GPU" "GPUs: none" "$out"
expect "--topo without GPU" "no GPU found" "$out"
out=$("$mkinfo" 2>&1)
expect "plain mkinfo prints the topology" "^topology (" "$out"
out=$("$mkinfo" --op ag_gemm --m 8192 --n 8192 --k 8192 2>&1)
expect "--op without GPU" "no GPU found: planning for 132-SM GPUs" "$out"
expect "--op without GPU" "plan of ag_gemm m=8192 n=8192 k=8192" "$out"
expect "--op without GPU" "decision  fused" "$out"
expect "--op without GPU" "CTAs      132 = compute" "$out"

out=$("$mkinfo" --op gemm_ar --m 8192 --n 8192 --k 8192 2>&1)
expect "--op gemm_ar" "plan of gemm_ar m=8192 n=8192 k=8192" "$out"
expect "--op gemm_ar" "decision  fused" "$out"
expect "--op gemm_ar" "CTAs      132 = compute 132 + intra 0" "$out"
expect "--op gemm_ar" "every peer's inbox" "$out"
expect "--op gemm_ar" "k-slices  1 (whole tiles)" "$out"
out=$("$mkinfo" --op gemm_ar --m 16 --n 8192 --k 8192 2>&1)
expect "gemm_ar m=16" "decode-sized m (<= 128): 132 CTAs, each 64 columns of D by all 16 rows (wgmma N = 16) over one of 1 K-slice(s)" "$out"
expect "gemm_ar m=16" "with a counter per column block" "$out"
out=$("$mkinfo" --op gemm_ar --m 8 --n 8192 --k 8192 2>&1)
expect "gemm_ar m=8" "(every rank, all rows) as LL lines" "$out"
out=$("$mkinfo" --op gemm_ar --m 128 --n 1024 --k 8192 2>&1)
expect "gemm_ar m=128 n=1024" "(wgmma N = 128) over one of 8 K-slice(s)" "$out"
expect "gemm_ar m=128 n=1024" "with a counter per column block" "$out"
out=$("$mkinfo" --op gemm_ar --m 129 --n 8192 --k 8192 2>&1)
expect "gemm_ar m=129" "k-slices  1 (whole tiles)" "$out"
out=$("$mkinfo" --op moe_dispatch --m 4096 --n 7168 --k 8 2>&1)
expect "--op moe_dispatch" "plan of moe_dispatch m=4096 n=7168 k=8" "$out"
expect "--op moe_dispatch" "CTAs      132 = compute 0 + intra 132" "$out"
expect "--op moe_dispatch" "once per destination rank" "$out"
out=$("$mkinfo" --op moe_combine --m 4096 --n 7168 --k 8 2>&1)
expect "--op moe_combine" "sums them in fp32" "$out"
out=$("$mkinfo" --op moe_dispatch_gemm --m 4096 --n 7168 --k 8 2>&1)
expect "--op moe_dispatch_gemm" "the others start each local" "$out"
expect "--op moe_dispatch_gemm" "the experts' GEMM is not in the model" "$out"
out=$("$mkinfo" --op moe_layer --m 4096 --n 7168 --k 8 2>&1)
expect "--op moe_layer" "plan of moe_layer m=4096 n=7168 k=8" "$out"
expect "--op moe_layer" "two launches" "$out"
expect "--op moe_layer" "the experts' GEMMs are not in the model" "$out"
# with the experts and the first GEMM's columns: the grouped GEMMs' time
# (2 x H200 records: the layer 7.04-7.09 ms with its rows pushed, thirty-second
# session; mkMoEDispatchGemm 4.55 ms, thirtieth)
out=$("$mkinfo" --op moe_layer --m 4096 --n 7168 --k 8 --experts 256 --gemm-n 4096 --ranks 2 2>&1)
expect "moe_layer --experts" "model     compute 6442 us, .* fused 6730 us" "$out"
expect "moe_layer --experts" "the combine after them" "$out"
out=$("$mkinfo" --op moe_dispatch_gemm --m 4096 --n 7168 --k 8 --experts 256 --gemm-n 4096 \
      --ranks 2 2>&1)
expect "moe_dispatch_gemm --experts" "fused 4398 us" "$out"
out=$("$mkinfo" --op moe_layer --m 64 --n 64 --k 2 --experts 7 --gemm-n 64 --ranks 2 2>&1); rc=$?
if [ $rc = 1 ] && echo "$out" | grep -q "experts a multiple of the 2 ranks"; then
    passed=$((passed + 1))
else
    echo "FAIL: mkinfo --experts 7 at 2 ranks: exit $rc, $out"; failed=$((failed + 1))
fi
out=$("$mkinfo" --op gemm_rs --m 16 --n 8192 --k 8192 2>&1)
expect "gemm_rs m=16" "decode-sized m (<= 128)" "$out"
expect "gemm_rs m=16" "(the rows' owner) as LL lines" "$out"
# ring_attn: m = seq_local, n = heads x head_dim, k = kv_heads x head_dim
out=$("$mkinfo" --op ring_attn --m 16384 --n 4096 --k 1024 --ranks 2 2>&1)
expect "--op ring_attn" "plan of ring_attn m=16384 n=4096 k=1024" "$out"
expect "--op ring_attn" "decision  fused (one node: the fused ring" "$out"
expect "--op ring_attn" "chunks of 2048 rows of k and of v (4194304 bytes each), 8 per" "$out"
expect "--op ring_attn" "a step is one rank's k and v, 64.0 MiB over nvlink" "$out"
expect "--op ring_attn" "overlap   copies .* <= compute .* (hidden)" "$out"
expect "--op ring_attn" "8.80 TFLOP on the busiest rank .*head_dim 128, mkAttnFull.* at 610 TFLOP/s" "$out"
# the mask and head_dim: zigzag half the FLOPs on every rank, plain causal
# (P - 1/2) / P on the last rank, each at its measured rate; at head_dim 64
# a causal mask's cut blocks weigh less the more keys (4k alone: 404)
out=$("$mkinfo" --op ring_attn --m 16384 --n 4096 --k 1024 --ranks 2 --mask zigzag 2>&1)
expect "ring_attn zigzag" "4.40 TFLOP on the busiest rank .*mkAttnCausalZigzag.* at 549 TFLOP/s" "$out"
out=$("$mkinfo" --op ring_attn --m 16384 --n 4096 --k 1024 --ranks 2 --mask causal --head-dim 64 2>&1)
expect "ring_attn causal d64" "6.60 TFLOP on the busiest rank .*head_dim 64, mkAttnCausal.* at 474 TFLOP/s" "$out"
out=$("$mkinfo" --op ring_attn --m 4096 --n 2048 --k 2048 --ranks 1 --mask causal --head-dim 64 2>&1)
expect "attn causal d64 4k" "head_dim 64, mkAttnCausal: half the unmasked, P = 1.* at 404 TFLOP/s" "$out"
for bad in "--op ring_attn --m 64 --n 64 --k 64 --head-dim 96" \
           "--op ring_attn --m 64 --n 64 --k 64 --mask sliding" \
           "--op ag_gemm --m 64 --n 64 --k 64 --mask causal" \
           "--comm --op ring_attn --m 64 --n 64 --k 64 --head-dim 64" \
           "--predict --mask causal" \
           "--op moe_layer --m 64 --n 64 --k 2 --experts 8" \
           "--op moe_combine --m 64 --n 64 --k 2 --experts 8 --gemm-n 64" \
           "--comm --op moe_layer --m 64 --n 64 --k 2 --experts 8 --gemm-n 64"; do
    # shellcheck disable=SC2086
    out=$("$mkinfo" $bad 2>&1); rc=$?
    if [ $rc = 2 ] && echo "$out" | grep -q -- "--head-dim\|--mask\|--predict takes\|--experts and --gemm-n go"; then
        passed=$((passed + 1))
    else
        echo "FAIL: mkinfo $bad: exit $rc, $out"; failed=$((failed + 1))
    fi
done
out=$("$mkinfo" --op ring_attn --m 4096 --n 4096 --k 1024 --ranks 4 --nodes 2 --net cx7 2>&1)
expect "ring_attn across nodes" "decision  unfused (ranks on several nodes" "$out"
expect "ring_attn across nodes" "sequence  mkAllGather of k and of v" "$out"
out=$("$mkinfo" --op ring_attn --m 4096 --n 4096 --k 1024 --ranks 8 --nodes 2 2>&1)
expect "ring_attn, 16 ranks" "at most 8 (mkErrUnsupported)" "$out"
out=$(MK_SM_SPLIT=ring_attn:fused=0 "$mkinfo" --op ring_attn --m 4096 --n 4096 --k 1024 \
      --ranks 2 2>&1)
expect "ring_attn:fused=0" "decision  unfused (one node, but MK_SM_SPLIT sets fused=0" "$out"
out=$("$mkinfo" --op ring_attn --m 4096 --n 4096 --k 1024 --dtype fp32 2>&1); rc=$?
expect "ring_attn fp32" "takes 2-byte elements" "$out"
[ $rc = 1 ] && passed=$((passed + 1)) || { echo "FAIL: ring_attn fp32 exit $rc"; failed=$((failed + 1)); }

if grep -q "define HAVE_HWLOC 1" "$builddir/config.h" 2>/dev/null; then
    out=$(MK_TOPO_XML=$srcdir/tests/xml/dgx-h100.xml \
          MK_TOPO_FAKE_GPUS=link=nv18 "$mkinfo" --op gemm_rs --m 16384 \
          --n 8192 --k 8192 --nodes 2 2>&1)
    expect "fixture" "GPU7  0000:" "$out"
    expect "fixture" "NICs: mlx5_7 (same PCIe switch)" "$out"
    expect "fixture" "  GPU0  X      NV18   NV18" "$out"
    expect "fixture" "16 rank(s), 8 per node, 2 node(s)" "$out"
    expect "fixture" "1 NIC(s) of 50 GB/s" "$out"
fi

# --net: the NICs planned for across nodes, whatever this host has
out=$("$mkinfo" --op gemm_rs --m 16384 --n 8192 --k 8192 --ranks 8 --nodes 2 --net cx7 2>&1)
expect "--net cx7" "16 rank(s), 8 per node, 2 node(s)" "$out"
expect "--net cx7" "1 NIC(s) of 50 GB/s" "$out"
out=$("$mkinfo" --op gemm_rs --m 16384 --n 8192 --k 8192 --ranks 8 --nodes 2 --net efa 2>&1)
expect "--net efa" "2 NIC(s) of 25 GB/s" "$out"
out=$("$mkinfo" --op allreduce --m 1048576 --n 1 --ranks 1 --nodes 2 --net socket 2>&1)
expect "--net socket" "socket transport" "$out"
# all-reduce across nodes of 2 ranks from 1 MiB: hierarchical (half the
# bytes leave the node); one rank per node or below 1 MiB: flat
out=$("$mkinfo" --op allreduce --m 1048576 --n 1 --ranks 2 --nodes 2 --net socket 2>&1)
expect "hierarchical all-reduce" "hierarchy reduce-scatter inside the node (2 ranks)" "$out"
expect "hierarchical all-reduce" "per rank: 0.500 x S, flat 1.000 x S" "$out"
out=$("$mkinfo" --op allgather --m 1048576 --n 1 --ranks 2 --nodes 2 --net socket 2>&1)
expect "hierarchical all-gather" "hierarchy all-gather across the 2 nodes" "$out"
expect "hierarchical all-gather" "per rank: 0.250 x S, flat 0.500 x S" "$out"
out=$("$mkinfo" --op reducescatter --m 1048576 --n 1 --ranks 2 --nodes 2 --net socket 2>&1)
expect "hierarchical reduce-scatter" "reduce-scatter inside the node (2 ranks), reduce-scatter across" "$out"
out=$("$mkinfo" --op allreduce --m 1000 --n 1 --ranks 2 --nodes 2 --net socket 2>&1)
printf '%s\n' "$out" | grep -q "hierarchy" && { echo "FAIL: 2 KB all-reduce planned hierarchically"; failed=$((failed + 1)); } || passed=$((passed + 1))
out=$("$mkinfo" --op allreduce --m 1048576 --n 1 --ranks 1 --nodes 2 --net socket 2>&1)
printf '%s\n' "$out" | grep -q "hierarchy" && { echo "FAIL: one rank per node planned hierarchically"; failed=$((failed + 1)); } || passed=$((passed + 1))
# small blocks on one node: LL lines, one channel per 2 KiB; across nodes
# or above 256 KiB a block: the slots
out=$("$mkinfo" --op allgather --m 4096 --n 1 --ranks 4 2>&1)
expect "LL all-gather" "kernel    1 channel(s), LL lines" "$out"
out=$("$mkinfo" --op allreduce --m 65536 --n 1 --ranks 4 2>&1)
expect "LL all-reduce" "kernel    64 channel(s), LL lines (the flag in every word), one phase" "$out"
out=$("$mkinfo" --op allgather --m 4096 --n 1 --ranks 2 --nodes 2 --net socket 2>&1)
printf '%s
' "$out" | grep -q "LL lines" && { echo "FAIL: LL across nodes"; failed=$((failed + 1)); } || passed=$((passed + 1))
out=$("$mkinfo" --op allgather --m 16777216 --n 1 --ranks 4 2>&1)
printf '%s
' "$out" | grep -q "LL lines" && { echo "FAIL: LL for a 8 MiB block"; failed=$((failed + 1)); } || passed=$((passed + 1))
# large copies through the slots on one node of more than 2 ranks: peer
# after peer; reductions there only while a channel's part is one chunk
# (reduce-scatter) or up to 4 (all-reduce); 2 ranks: chunk after chunk
out=$("$mkinfo" --op allgather --m 16777216 --n 1 --ranks 4 2>&1)
expect "peer-major all-gather" "TMA to peers and locally, peer after peer" "$out"
out=$("$mkinfo" --op allgather --m 16777216 --n 1 --ranks 2 2>&1)
expect "2-rank all-gather" "channel(s), TMA to peers, block" "$out"
out=$("$mkinfo" --op alltoall --m 16777216 --n 1 --ranks 8 2>&1)
expect "peer-major all-to-all" "peer after peer" "$out"
out=$("$mkinfo" --op reducescatter --m 16777216 --n 1 --ranks 4 2>&1)
expect "reduce-scatter, parts of one chunk" "peer after peer" "$out"
out=$("$mkinfo" --op reducescatter --m 67108864 --n 1 --ranks 4 2>&1)
printf '%s\n' "$out" | grep -q "peer after peer" && { echo "FAIL: reduce-scatter peer after peer, 2 chunks"; failed=$((failed + 1)); } || passed=$((passed + 1))
out=$("$mkinfo" --op allreduce --m 134217728 --n 1 --ranks 4 2>&1)
expect "all-reduce, parts of 4 chunks" "two phases, peer after peer" "$out"
out=$("$mkinfo" --op allreduce --m 16777216 --n 1 --ranks 2 2>&1)
expect "2-rank all-reduce, parts of one chunk" "the second half of the channels a phase behind" "$out"
out=$("$mkinfo" --op allreduce --m 33554432 --n 1 --ranks 2 2>&1)
printf '%s\n' "$out" | grep -q "a phase behind" && { echo "FAIL: 2-rank all-reduce staggered, 2 chunks"; failed=$((failed + 1)); } || passed=$((passed + 1))
out=$("$mkinfo" --op allreduce --m 8388608 --n 1 --ranks 4 2>&1)
printf '%s\n' "$out" | grep -q "a phase behind" && { echo "FAIL: 4-rank all-reduce staggered"; failed=$((failed + 1)); } || passed=$((passed + 1))
out=$("$mkinfo" --op allreduce --m 536870912 --n 1 --ranks 4 2>&1)
printf '%s\n' "$out" | grep -q "peer after peer" && { echo "FAIL: all-reduce peer after peer, 16 chunks"; failed=$((failed + 1)); } || passed=$((passed + 1))
out=$("$mkinfo" --op allgather --m 16777216 --n 1 --ranks 2 2>&1)
printf '%s\n' "$out" | grep -q "peer after peer" && { echo "FAIL: 2-rank all-gather peer after peer"; failed=$((failed + 1)); } || passed=$((passed + 1))
out=$("$mkinfo" --op ag_gemm --m 8 --n 8 --k 8 --net ib 2>&1); rc=$?
expect "bad --net" "takes cx7, efa or socket" "$out"
[ $rc = 2 ] && passed=$((passed + 1)) || { echo "FAIL: bad --net exit $rc"; failed=$((failed + 1)); }
# --predict: every fused GEMM op at five M, the original's figures beside
out=$("$mkinfo" --predict --ranks 8 --nodes 2 --net cx7 2>&1); rc=$?
[ $rc = 0 ] && passed=$((passed + 1)) || { echo "FAIL: --predict exit $rc"; failed=$((failed + 1)); }
expect "--predict" "model of 16 rank(s): 2 node(s) x 8" "$out"
expect "--predict" "1 NIC(s) of 50 GB/s per GPU" "$out"
expect "--predict" "^GEMM+ReduceScatter    131072  fused" "$out"
expect "--predict" "unfused across nodes" "$out"
expect "--predict" "published by the original mKernel.*397-409" "$out"
n=$(printf '%s\n' "$out" | grep -c "^\(AllGather+GEMM\|GEMM+ReduceScatter\|GEMM+AllReduce\) ")
[ "$n" = 15 ] && passed=$((passed + 1)) || { echo "FAIL: --predict printed $n rows, not 15"; failed=$((failed + 1)); }
out=$("$mkinfo" --predict --ranks 2 2>&1)
expect "--predict one node" "model of 2 rank(s): 1 node(s) x 2" "$out"
if printf '%s\n' "$out" | grep -q "unfused across nodes"; then
    echo "FAIL: --predict on one node says unfused across nodes"; failed=$((failed + 1))
else
    passed=$((passed + 1))
fi
out=$("$mkinfo" --predict --op ag_gemm 2>&1); rc=$?
expect "--predict with --op" "takes only --ranks, --nodes and --net" "$out"
[ $rc = 2 ] && passed=$((passed + 1)) || { echo "FAIL: --predict --op exit $rc"; failed=$((failed + 1)); }

# tools/model_check.py: the plan's times against measured mkAllGatherGemm
# runs (2 x H200 and 4 x H200): the model of that op stays within 15%
# tools/plan_choices.sh: a choice and two times for each of 288 cases
out=$(bash "$srcdir/tools/plan_choices.sh" "$mkinfo" 2>&1); rc=$?
n=$(printf '%s\n' "$out" | grep -cE "^[0-9]+ x[0-9]+ (ag_gemm|gemm_rs|gemm_ar) [0-9x]+ (fused|unfused) [0-9]+ [0-9]+$")
[ $rc = 0 ] && [ "$n" = 288 ] && passed=$((passed + 1)) ||
    { echo "FAIL: plan_choices.sh exit $rc, $n of 288 lines well formed"; failed=$((failed + 1)); }
expect "plan_choices.sh" "^2 x1 ag_gemm 8192x8192x8192 fused " "$out"

j2=$srcdir/bench/results/NVIDIA_H200/2xH200-runtime/ag_gemm-run7.json
j4=$srcdir/bench/results/NVIDIA_H200/4xH200-2026-11-26/ag_gemm-np4.json
if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 missing: tools/model_check.py not run"
elif [ ! -f "$j2" ] || [ ! -f "$j4" ]; then
    echo "no bench/results in this tree: tools/model_check.py not run"
else
    out=$(MKINFO=$mkinfo python3 "$srcdir/tools/model_check.py" --check "$j2" "$j4" 2>&1); rc=$?
    expect "model_check ag_gemm" "^10 records (0 skipped)" "$out"
    [ $rc = 0 ] && passed=$((passed + 1)) || { echo "FAIL: model_check --check exit $rc:"; printf '%s\n' "$out"; failed=$((failed + 1)); }
    # the collectives at 4 ranks, 1 MB-1 GB: median 9%, none past 35%
    jc=$srcdir/bench/results/NVIDIA_H200/4xH200-2026-11-26/coll-np4.json
    out=$(MKINFO=$mkinfo python3 "$srcdir/tools/model_check.py" --check --tol 0.35 "$jc" 2>&1); rc=$?
    [ $rc = 0 ] && passed=$((passed + 1)) || { echo "FAIL: model_check collectives exit $rc:"; printf '%s\n' "$out"; failed=$((failed + 1)); }
    out=$(MKINFO=$mkinfo python3 "$srcdir/tools/model_check.py" --check --tol 0.001 "$j4" 2>&1); rc=$?
    expect "model_check --tol 0.001" "beyond 0% (\*)" "$out"
    [ $rc = 1 ] && passed=$((passed + 1)) || { echo "FAIL: model_check --check --tol 0.001 exit $rc"; failed=$((failed + 1)); }
fi

out=$("$mkinfo" --op gemm --m 1 --n 1 --k 1 2>&1); rc=$?
expect "bad --op" "takes allgather" "$out"
[ $rc = 2 ] && passed=$((passed + 1)) || { echo "FAIL: bad --op exit $rc"; failed=$((failed + 1)); }
out=$("$mkinfo" --op ag_gemm --m 8 2>&1); rc=$?
expect "missing sizes" "needs --m and --n and --k" "$out"
out=$(MK_SM_SPLIT=intra=x "$mkinfo" --op ag_gemm --m 8 --n 8 --k 8 2>&1); rc=$?
expect "bad MK_SM_SPLIT" "MK_SM_SPLIT=\"intra=x\"" "$out"
[ $rc = 1 ] && passed=$((passed + 1)) || { echo "FAIL: bad MK_SM_SPLIT exit $rc"; failed=$((failed + 1)); }
echo "$passed passed, $failed failed"
[ $failed = 0 ]
