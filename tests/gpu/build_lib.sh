# build_lib.sh - sourced by the build mode of the GPU scripts (ag_gemm.sh,
# gemm_rs.sh, moe.sh, attn.sh, kill.sh, net.sh): the library they link
# (libmkcore.a of a build tree under build-gpu/, configured once) and
# mkbench's common object, and the flags every GPU program is built with.
#
#   gpu_build_lib OUTDIR [BUILD_TREE]     (default tree: $MK_BUILD_TREE, else
#                                         build-gpu/agg-build)
#
# MK_BUILD_DEFS adds preprocessor definitions to the library's build (lab
# builds, e.g. -DMKI_GRS_TRACE=40): give such a build a tree of its own.
#
# Sets NVCC, BLD, COMMIT, ARCH, INC and LIBS; the library's make log goes
# to OUTDIR/build.log.  Returns non-zero, with the log's tail, on failure.
gpu_build_lib() {
    NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
    BLD=${2:-${MK_BUILD_TREE:-build-gpu/agg-build}}
    mkdir -p "$BLD" "$1"
    [ -f "$BLD/Makefile" ] || (cd "$BLD" && "$(cd ../.. && pwd)/configure" -q) || return 1
    make -C "$BLD" -j"${JOBS:-2}" ${MK_BUILD_DEFS:+"DEFS=-DHAVE_CONFIG_H $MK_BUILD_DEFS"} \
        libmkcore.la > "$1/build.log" 2>&1 || { tail -30 "$1/build.log"; return 1; }
    COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo uncommitted)
    ARCH="-gencode=arch=compute_90a,code=sm_90a"
    INC="-Iinclude -Isrc/core -Isrc -I. -Ikernels -Ikernels/gemm -I$BLD -Itools/mkbench -I/usr/lib/x86_64-linux-gnu/pmix2/include"
    LIBS="$BLD/.libs/libmkcore.a -lcublas -lnccl -lpmix -lhwloc -libverbs -lefa -lrt -ldl -lpthread -lm"
    gcc -std=gnu11 -O2 -I/usr/local/cuda/include -DMKB_GIT_COMMIT="\"$COMMIT\"" \
        -c tools/mkbench/common.c -o "$BLD/mkb_common.o"
}
