#!/bin/sh
# hello_f.sh - the Fortran example runs alone (size 1) and under
# mpirun -np 2 (PMIx).
builddir=${top_builddir:-.}
bin=$builddir/examples/hello_f
[ -n "$FC" ] || { echo "SKIP: configure found no Fortran compiler"; exit 77; }
. "${top_srcdir:-.}/examples/hello-common.sh"
hello_check "$bin" "hello from Fortran rank"
