# trace_build.sh - sourced by the lab traces' unit tests (coll_trace.sh,
# moe_trace.sh): trace_build DEFINE SOURCE compiles kernels/ops/SOURCE for
# sm_90a with -DDEFINE (the lab build) and counts, through the caller's ok
# and bad, that ptxas takes it and that nothing spills; a note and nothing
# counted without nvcc or config.h.  Needs src, bld and tmp set.
trace_build() {
    NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
    PTXAS=$(dirname "$NVCC")/ptxas
    if [ ! -x "$NVCC" ] || [ ! -x "$PTXAS" ] || [ ! -f "$bld/config.h" ]; then
        echo "note: no nvcc or config.h: the trace build's compile not checked"
        return 0
    fi
    if "$NVCC" -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -DNDEBUG -DHAVE_CONFIG_H \
        "-D$1" -I"$src/include" -I"$src/src/core" -I"$src/src" -I"$src" -I"$bld" \
        -I"$src/kernels" -I"$src/kernels/gemm" -I"$src/kernels/ops" -ptx "$src/kernels/ops/$2" \
        -o "$tmp/trace.ptx" > "$tmp/nvcc.log" 2>&1; then
        "$PTXAS" -arch=sm_90a -v "$tmp/trace.ptx" -o "$tmp/trace.cubin" > "$tmp/ptxas.log" 2>&1 &&
            ok || bad "ptxas of the trace build: $(tail -5 "$tmp/ptxas.log")"
        if grep -E 'bytes spill (stores|loads)' "$tmp/ptxas.log" |
            grep -vq ' 0 bytes spill stores, 0 bytes spill loads'; then
            bad "the trace build spills registers"
        else
            ok
        fi
    else
        bad "nvcc -D$1 kernels/ops/$2: $(tail -5 "$tmp/nvcc.log")"
    fi
}
