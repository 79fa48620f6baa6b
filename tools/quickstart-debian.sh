#!/bin/bash
# quickstart-debian.sh - on a fresh Debian 12 (or Ubuntu 24.04) machine:
# install what mkernel needs, build it in ./build, and run the demo (one
# rank per GPU: mkAllGatherGemm against the unfused sequence, verified).
#
#   tools/quickstart-debian.sh            (as root, or a user with sudo)
#
# CUDA (12.4 or newer, with nvcc) is not a Debian package: it must already
# be installed, by default in /usr/local/cuda (set CUDA_HOME otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo

if [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
    echo "quickstart: no nvcc in $CUDA_HOME/bin. Install the CUDA toolkit" \
         "(https://developer.nvidia.com/cuda-downloads) or set CUDA_HOME." >&2
    exit 1
fi

echo "== installing build and test dependencies (apt-get)"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
    build-essential autoconf automake libtool pkg-config \
    libpmix-dev libhwloc-dev libibverbs-dev \
    openmpi-bin libopenmpi-dev slurm-wlm munge \
    gfortran mandoc gnuplot-nox iproute2 procps >/dev/null

echo "== building in $top/build"
./autogen.sh >/dev/null
mkdir -p build
cd build
[ -f Makefile ] || ../configure --with-cuda="$CUDA_HOME"
make -j"$(nproc)"

# One rank per local GPU (mkAllGatherGemm against mkAllGather + cuBLAS,
# verified, with a table); without a GPU, two ranks show the communicator.
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
np=$ngpu
[ "$np" -ge 1 ] || np=2
echo "== running the demo on $np rank(s) ($ngpu GPU(s) found)"
mpi_root=
[ "$(id -u)" = 0 ] && mpi_root="--allow-run-as-root"
if command -v mpirun >/dev/null; then
    timeout 300 mpirun $mpi_root --oversubscribe -np "$np" examples/demo
else
    timeout 300 examples/demo
fi
echo "== done; run the tests with: make -C build check"
