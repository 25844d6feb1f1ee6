#!/usr/bin/env bash
# Builds GASNet-EX's smp-conduit tests that `amrq-bench peers --gasnet DIR` runs
# (testam, testlarge, testbarrier) from a GASNet-EX source tree you supply; amrq never
# ships or downloads GASNet-EX. Get the release tarball from https://gasnet.lbl.gov
# (2025.8.0 is the version whose output amrq-bench's parser is tested against), unpack
# it, then:
#
#   amrq-bench/peers/build-gasnet.sh ~/GASNet-2025.8.0 ~/gasnet-smp
#   amrq-bench peers --gasnet ~/gasnet-smp
#
# The build is out of tree (OUT/build), takes about a minute on 2 cores, and needs a C
# compiler and make. The configuration is the single-node one: smp conduit with
# process shared memory (PSHM), sequential (no threads), no network conduits.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 GASNET_SOURCE_DIR [OUT_DIR (default: ./gasnet-smp)]" >&2
    exit 2
fi
src=$(cd "$1" && pwd)
out=$(mkdir -p "${2:-gasnet-smp}" && cd "${2:-gasnet-smp}" && pwd)
if [ ! -x "$src/configure" ] || [ ! -d "$src/smp-conduit" ]; then
    echo "$0: $src is not a GASNet-EX source tree (no configure or smp-conduit/)" >&2
    exit 2
fi

mkdir -p "$out/build"
cd "$out/build"
echo "== configure (log: $out/build/configure.log)"
"$src/configure" --disable-mpi --disable-ibv --disable-ucx --disable-udp --disable-ofi \
    --enable-smp --enable-pshm --disable-par --disable-parsync --disable-mpi-compat \
    >configure.log 2>&1 || { tail -20 configure.log; exit 1; }
jobs=$(nproc 2>/dev/null || echo 2)
echo "== make (log: $out/build/make.log)"
{
    make -j"$jobs" -C smp-conduit seq
    make -j"$jobs" -C smp-conduit testam testlarge testbarrier
} >make.log 2>&1 || { tail -20 make.log; exit 1; }
cp smp-conduit/testam smp-conduit/testlarge smp-conduit/testbarrier "$out/"
echo "== built: $out/testam $out/testlarge $out/testbarrier"
echo "run: amrq-bench peers --gasnet $out"
