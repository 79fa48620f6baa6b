#!/bin/sh
# hello.sh - examples/hello runs alone (a communicator of size 1) and under
# mpirun -np 2 (PMIx), and says what each rank sees.
builddir=${top_builddir:-.}
bin=$builddir/examples/hello
. "${top_srcdir:-.}/examples/hello-common.sh"
hello_check "$bin" "hello from rank"
