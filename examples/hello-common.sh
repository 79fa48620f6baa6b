# hello-common.sh - sourced by hello.sh and hello_f.sh: run a hello
# program without a launcher, then on 2 ranks under mpirun, and check
# that each rank printed its line.  Prints "N passed, M failed".

hello_check() {
    bin=$1 prefix=$2
    [ -x "$bin" ] || { echo "SKIP: $bin not built"; exit 77; }
    command -v timeout >/dev/null || { echo "SKIP: no timeout(1)"; exit 77; }
    passed=0 failed=0
    # Alone: no launcher, so a communicator of size 1.
    out=$(timeout -k 5 60 "$bin" 2>&1); rc=$?
    printf '%s\n' "$out"
    if [ $rc = 0 ] && printf '%s\n' "$out" | grep -q "^$prefix 0 of 1: local rank 0 of 1, 1 node(s)"; then
        passed=$((passed + 1))
    else
        echo "FAIL: $bin alone (exit $rc)"; failed=$((failed + 1))
    fi
    MPIRUN=${MPIRUN:-$(command -v mpirun)}
    if [ -z "$MPIRUN" ] || [ ! -x "$MPIRUN" ]; then
        echo "no mpirun: the 2-rank run is skipped"
    else
        OMPI_MCA_btl_vader_single_copy_mechanism=none
        export OMPI_MCA_btl_vader_single_copy_mechanism
        out=$(timeout -k 5 60 "$MPIRUN" --allow-run-as-root --oversubscribe \
              -np 2 "$bin" 2>&1); rc=$?
        printf '%s\n' "$out"
        for r in 0 1; do
            if [ $rc = 0 ] && printf '%s\n' "$out" | grep -q "^$prefix $r of 2: local rank $r of 2, 1 node(s)"; then
                passed=$((passed + 1))
            else
                echo "FAIL: rank $r of 2 under mpirun (exit $rc)"
                failed=$((failed + 1))
            fi
        done
    fi
    echo "$passed passed, $failed failed"
    [ $failed = 0 ]
    exit $?
}
