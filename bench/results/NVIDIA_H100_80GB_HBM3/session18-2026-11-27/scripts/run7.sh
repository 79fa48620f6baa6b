#!/bin/bash
# s18 call 7: main 394d646 (receiving thread, 4 x 1 MiB net slots, credits as zero-byte writes, proxy naps by time):
# the kill drill's virtual-node steps (a dead rank seen through the receiving thread) and the random soak (2 ranks beside 16 as 2 x 8)
set -u
tar xJf build-gpu/sk7.tar.xz
MK_KILL_ONLY="2x2" bash tests/gpu/kill.sh > $OUT/kill-run.txt 2>&1; echo "kill rc=$?"; tail -12 $OUT/kill-run.txt
bash tests/gpu/soak.sh par 60 > $OUT/soak-run.txt 2>&1; echo "soak rc=$?"; tail -12 $OUT/soak-run.txt
