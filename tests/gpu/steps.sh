# steps.sh - the step harness the per-op GPU scripts share (sourced, not
# run).  The script sets, before calling step:
#   MPI    the mpirun command line (with its -x list)
#   LOG    the log every step appends to; SUMMARY the table's file
#   B      the folder of the programs; PROGS their names, a regex
#          ("test_moe|mkbench_moe"): a process of one of them still alive
#          after its step is killed and fails the run
# and reads status (1: a step failed) and late (1: a step skipped for time).
# Every step runs under its own timeout, cut to MK_GPU_DEADLINE when set.
status=0 late=0

# -x for the optional variables that are set (the virtual-node steps).
xopt() {
    local v
    for v in MK_NODE_SIZE MK_TRANSPORT; do
        [ -n "${!v:-}" ] && printf ' -x %s' "$v"
    done
}

step() { # NAME LIMIT NP ARGS...
    local name=$1 limit=$2 np=$3; shift 3
    if [ -n "${MK_GPU_DEADLINE:-}" ] && [ $((MK_GPU_DEADLINE - $(date +%s))) -lt "$limit" ]; then
        limit=$((MK_GPU_DEADLINE - $(date +%s)))
    fi
    if [ "$limit" -lt 10 ]; then
        printf "%-44s %-7s (out of time)\n" "$name" SKIP >> "$SUMMARY"
        echo "--- $name: SKIP (out of time)" >> "$LOG"
        late=1
        return
    fi
    local t0=$(date +%s) rc res=PASS
    echo "=== $name (np $np, limit ${limit}s, MK_NODE_SIZE=${MK_NODE_SIZE:-} CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}): $*" >> "$LOG"
    # shellcheck disable=SC2046 # $(xopt): zero or more "-x VAR" words
    timeout -k 10 "$limit" $MPI $(xopt) -np "$np" "$@" >> "$LOG" 2>&1
    rc=$?
    [ $rc -ne 0 ] && res=FAIL && status=1
    { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && res=TIMEOUT
    printf "%-44s %-7s %4d s (rc %d)\n" "$name" "$res" $(( $(date +%s) - t0 )) $rc >> "$SUMMARY"
    local left
    left=$(pgrep -f "^(\./)?$B/($PROGS)( |$)" || true)
    if [ -n "$left" ]; then
        echo "LEFTOVER after $name: $left" >> "$SUMMARY"
        status=1
        for p in $left; do kill -9 "$p" 2>/dev/null; done
    fi
}

devs() { seq -s, 0 $(($1 - 1)); } # devs 4 -> 0,1,2,3
