#!/usr/bin/env bash
# The many-core campaign, for a machine with cores to spare (a device machine lent to a session):
# the scaling and NIC-thread benches whose claims two vCPUs cannot show, bounded to ~9 minutes
# in all so it fits one device call. On this machine: pack and carry, then run it there —
#   ../shared/tools/bench-pack.sh          (packs Node and the built tree into .bench-pack/)
#   device run, carry [".bench-pack"]:  bash .bench-pack/run.sh bash bench/many-core.sh
# Prints to stdout and, when $OUT is set, to $OUT/many-core.txt. Each step has its own time
# limit; a step that runs past it is cut and the next one runs. MC_QUICK=1: tiny sizes (a smoke
# run of the script itself).
set -u
log=${OUT:+$OUT/many-core.txt}
: "${log:=/dev/null}"
quick=${MC_QUICK:-0}
big=$((512 << 20)); [ "$quick" = 1 ] && big=$((32 << 20))
reps=2; [ "$quick" = 1 ] && reps=1
export GLIBC_TUNABLES=${GLIBC_TUNABLES:-glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456}

step() { # step SECONDS TITLE ENV... -- COMMAND...
  local secs=$1 title=$2; shift 2
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  echo "## $title ($(date -u +%H:%M:%S), limit ${secs}s): ${envs[*]} $*" | tee -a "$log"
  env "${envs[@]}" timeout "$secs" "$@" 2>&1 | tee -a "$log"
  echo "(exit ${PIPESTATUS[0]})" | tee -a "$log"
}

echo "# many-core campaign: $(nproc) cores, node $(node --version), $(date -u)" | tee -a "$log"
# 4 QPs over workers 1, 2, 4 against 1 and 4 raw node:dgram worker-thread pairs, same run.
step 200 "multi-QP scaling" MQ_BYTES=$big MQ_REPS=$reps MQ_WORKERS=1,2,4 MQ_RAW=1,4 -- node bench/multi-qp.bench.mjs
# Goodput, CPU per GB, main-thread ELU and the 64 B round trip, workers 0 and 1 against raw.
step 150 "NIC thread vs inline vs raw" NIC_BYTES=$big NIC_REPS=$reps NIC_RTTS=2000 -- node bench/nic-offload.bench.mjs
# The same round trips with the NIC thread polling its WQE ring after a turn (cores to spare).
step 60 "NIC thread polling 50 µs" NIC_BYTES=0 NIC_REPS=$reps NIC_RTTS=2000 NIC_MODES=0,1 'NIC_OPTS={"nicPollUs":50}' -- node bench/nic-offload.bench.mjs
# tcp against node:net with and without a live heap, default options.
step 90 "tcp goodput and 64 B" TCP_RDMA_BYTES=$big TCP_RDMA_REPS=$reps -- node bench/tcp-rdma.bench.mjs
echo "# done $(date -u)" | tee -a "$log"
