#!/bin/bash
# s23 call 9: the kill drill's steps across virtual nodes (the failure paths of the small-chunk push and the
# remote credit wait changed in 607032a) with HEAD's test_kill.
set -u
tar xJf build-gpu/s23h.tar.xz
nvidia-smi --query-gpu=name --format=csv,noheader
MK_KILL_ONLY="2x2|2x1" bash tests/gpu/kill.sh 2>&1 | tail -25
