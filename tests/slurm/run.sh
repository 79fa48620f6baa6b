#!/bin/sh
# run.sh - mkCommInit under srun --mpi=pmix on a one-node Slurm that this
# test starts and stops itself.
#
# A private munged, slurmctld and slurmd run on 127.0.0.1 with their own
# key, socket, ports, config, spool, state and logs in a fresh directory
# of the build tree (tests/slurm/run-XXXXXX), so nothing of the host's
# Slurm or munge is used or touched and a second run starts from scratch.
# The daemons are stopped by PID on every exit.  Every wait has a bound;
# the whole test stays under a minute.  It needs root (slurmd starts tasks
# as their user) and skips, saying why, when Slurm or munge is missing.
builddir=${top_builddir:-.}
mkinfo=$builddir/tools/mkinfo
test_comm=$builddir/tests/mpi/test_comm
skip() { echo "SKIP: $*"; exit 77; }
say() { echo "slurm test: $*"; }

PATH=$PATH:/usr/sbin:/sbin
for prog in munged slurmctld slurmd srun sinfo scontrol timeout; do
    command -v $prog >/dev/null || skip "$prog is not installed (Debian: slurm-wlm, munge)"
done
[ "$(id -u)" = 0 ] || skip "slurmd must run as root to start job steps"
[ -x "$mkinfo" ] || skip "$mkinfo not built"

# ---- the run directory -------------------------------------------------
mkdir -p "$builddir/tests/slurm" || exit 1
run=$(mktemp -d "$builddir/tests/slurm/run-XXXXXX") || exit 1
run=$(cd "$run" && pwd)
# Unix socket paths (munge, PMIx servers under the spool) hold 107 bytes.
if [ ${#run} -gt 60 ]; then
    rmdir "$run"
    run=$(mktemp -d "${TMPDIR:-/tmp}/mk-slurm-XXXXXX") || exit 1
    say "build path too long for Unix sockets: using $run"
fi
chmod 700 "$run"
mkdir -p "$run/state" "$run/spool" "$run/log" "$run/tmp"

pids=""
conf=$run/slurm.conf
# Step daemons (slurmstepd) and tasks are not children of slurmd and can
# outlive it: they are found by this run's SLURM_CONF in their environment.
strays() {
    for e in /proc/[0-9]*/environ; do
        p=${e#/proc/}; p=${p%/environ}
        tr '\0' '\n' 2>/dev/null <"$e" | grep -qx "SLURM_CONF=$conf" && echo "$p"
    done
}
cleanup() {
    rc=$?
    # Let the steps end while slurmd can still hear them (their sockets
    # in the spool go when they do), at most 10 s.
    for i in $(seq 1 50); do
        ls "$run/spool" 2>/dev/null | grep -q '_[0-9]*\.[0-9]' || break
        sleep 0.2
    done
    unset SLURM_CONF # so that the scans below do not find themselves
    pids="$pids $(strays)"
    for p in $pids; do kill "$p" 2>/dev/null; done
    # Give them 5 s to go, then force it.
    for i in 1 2 3 4 5 6 7 8 9 10; do
        alive=""
        for p in $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
        [ -z "$alive" ] && break
        sleep 0.5
    done
    for p in $alive; do kill -9 "$p" 2>/dev/null; done
    if [ $rc = 0 ] || [ $rc = 77 ]; then
        rm -rf "$run"
    else
        for f in "$run"/log/*.log; do
            [ -f "$f" ] && { echo "---- tail of $f"; tail -n 15 "$f"; }
        done
        echo "(state kept in $run)"
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# wait_for SECONDS WHAT COMMAND...: poll COMMAND every 0.2 s.
wait_for() {
    limit=$1 what=$2; shift 2
    end=$(( $(date +%s) + limit ))
    while ! "$@" >/dev/null 2>&1; do
        if [ "$(date +%s)" -ge $end ]; then
            say "$what did not happen within $limit s"; return 1
        fi
        sleep 0.2
    done
}

# ---- munge -------------------------------------------------------------
dd if=/dev/urandom of="$run/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$run/munge.key"
sock=$run/munge.sock
munged --foreground --force --key-file="$run/munge.key" --socket="$sock" \
    --pid-file="$run/munged.pid" --seed-file="$run/munged.seed" \
    --log-file="$run/log/munged.log" >"$run/log/munged.out" 2>&1 &
pids="$!"
wait_for 5 "munged listening" test -S "$sock" || exit 1

# ---- Slurm configuration -------------------------------------------------
# The node as slurmd sees it (name, CPUs, sockets, cores, memory).
node_line=$(slurmd -C 2>/dev/null | grep '^NodeName=')
node=$(printf '%s\n' "$node_line" | sed 's/^NodeName=\([^ ]*\).*/\1/')
[ -n "$node" ] || { say "slurmd -C printed no node line"; exit 1; }
# Two free TCP ports for slurmctld and slurmd, below the kernel's
# ephemeral range (32768 and up by default), so that no client connection
# of a test running beside this one can take them between the check and the
# bind; a port in any state (also TIME_WAIT) counts as taken.
port_free() {
    ! (ss -Hatn 2>/dev/null || netstat -atn 2>/dev/null) | grep -q "[:.]$1 "
}
base=$(( 20000 + ($$ * 7) % 12000 ))
while ! port_free $base || ! port_free $((base + 1)); do base=$((base + 2)); done

cat >"$conf" <<EOF
ClusterName=mktest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$base
SlurmdPort=$((base + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$run/state
SlurmdSpoolDir=$run/spool
# The PMIx plugin makes its per-step directories under TmpFS (default
# /tmp): keep them here, where job ids that restart at 1 cannot collide.
TmpFS=$run/tmp
SlurmctldPidFile=$run/slurmctld.pid
SlurmdPidFile=$run/slurmd.pid
SlurmctldLogFile=$run/log/slurmctld.log
SlurmdLogFile=$run/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$run/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=pmix
ReturnToService=2
MailProg=/bin/true
$(printf '%s\n' "$node_line" | sed 's/ UpTime=.*//') NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
: >"$run/plugstack.conf"
SLURM_CONF=$conf
export SLURM_CONF
# The client commands talk to munge through our socket too (AuthInfo).
srun --mpi=list 2>&1 | grep -q pmix ||
    { rm -rf "$run"; skip "Slurm has no PMIx plugin (srun --mpi=list)"; }

# ---- daemons ---------------------------------------------------------------
t0=$(date +%s)
slurmctld -D -i -f "$conf" >"$run/log/slurmctld.out" 2>&1 &
pids="$pids $!"
wait_for 10 "slurmctld answering" scontrol ping || exit 1
slurmd -D -f "$conf" -N "$node" >"$run/log/slurmd.out" 2>&1 &
pids="$pids $!"
node_idle() { sinfo -h -n "$node" -o %T | grep -q '^idle'; }
wait_for 15 "node $node idle" node_idle || { sinfo -N -l; exit 1; }
say "Slurm up in $(( $(date +%s) - t0 )) s (node $node, ports $base-$((base + 1)))"

# ---- the checks ------------------------------------------------------------
passed=0 failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

t1=$(date +%s)
out=$(timeout -k 3 20 srun --mpi=pmix -N 1 -n 2 -t 1 "$mkinfo" --comm 2>&1); rc=$?
printf '%s\n' "$out"
[ $rc = 0 ] || fail "srun --mpi=pmix -n 2 mkinfo --comm exited $rc"
for r in 0 1; do
    if printf '%s\n' "$out" | grep -q "^rank $r of 2: 1 node(s), local rank $r of 2"; then
        pass "rank $r of 2 under srun --mpi=pmix"
    else
        fail "no line 'rank $r of 2: 1 node(s), local rank $r of 2'"
    fi
done
say "srun took $(( $(date +%s) - t1 )) s"

# A rank that stays away from a bootstrap barrier: the others must get
# mkErrTimeout from the PMIx fence deadline under Slurm's PMIx server too.
if [ -x "$test_comm" ]; then
    out=$(timeout -k 3 25 srun --mpi=pmix -N 1 -n 2 -O -t 1 "$test_comm" fence 2>&1); rc=$?
    printf '%s\n' "$out"
    if [ $rc = 0 ] && [ "$(printf '%s\n' "$out" | grep -c ', 0 failed$')" = 2 ]; then
        pass "PMIx fence deadline under srun"
    else
        fail "PMIx fence deadline under srun (exit $rc)"
    fi
else
    say "tests/mpi/test_comm not built (no mpicc): fence check not run"
fi

# The batch script users copy (examples/mkernel.sbatch), submitted as a
# user would: sbatch --wait, output to a file, its C and Fortran ranks.
sbatch_script=${top_srcdir:-.}/examples/mkernel.sbatch
ex=$(cd "$builddir/examples" 2>/dev/null && pwd)
if [ -n "$ex" ] && [ -x "$ex/hello" ] && [ -f "$sbatch_script" ]; then
    t2=$(date +%s)
    out=$(timeout -k 3 60 sbatch --wait -o "$run/sbatch.out" --chdir="$run" \
          --export=ALL,MK_EXAMPLES="$ex" "$sbatch_script" 2>&1); rc=$?
    printf '%s\n' "$out"
    [ -f "$run/sbatch.out" ] && cat "$run/sbatch.out"
    [ $rc = 0 ] || fail "sbatch --wait examples/mkernel.sbatch exited $rc"
    for r in 0 1; do
        if grep -q "^hello from rank $r of 2: local rank $r of 2, 1 node(s)" "$run/sbatch.out" 2>/dev/null; then
            pass "examples/mkernel.sbatch: C rank $r of 2"
        else
            fail "examples/mkernel.sbatch: no line of C rank $r of 2"
        fi
        if [ -x "$ex/hello_f" ]; then
            if grep -q "^hello from Fortran rank $r of 2: local rank $r of 2, 1 node(s)" "$run/sbatch.out" 2>/dev/null; then
                pass "examples/mkernel.sbatch: Fortran rank $r of 2"
            else
                fail "examples/mkernel.sbatch: no line of Fortran rank $r of 2"
            fi
        fi
    done
    say "sbatch took $(( $(date +%s) - t2 )) s"
else
    say "examples/hello not built: the batch script is not run"
fi

echo "$passed passed, $failed failed"
[ $failed = 0 ]
