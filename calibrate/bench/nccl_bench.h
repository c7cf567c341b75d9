// NCCL collectives with nccl-tests conventions (see shared/reference/nccl.md §2), and the launcher
// environment that decides how the GPUs taking part are driven.
//
// Launch modes:
//   one process, N GPUs   no launcher variables: the process drives every visible GPU from one
//                          thread (ncclCommInitAll, one group call per iteration), like
//                          `nccl-tests -g N`; skipped with a note when only one GPU is visible.
//   one process per GPU    started by srun / mpirun / torchrun-style launchers; rank and world
//                          size from the environment, one GPU per process (local rank mod the
//                          visible GPUs), communicator from ncclCommInitRank with an id shared
//                          through --nccl-id-file, CLUSTERSIM_NCCL_ID (hex) or NCCL_COMM_ID.
//
// Operations (element type float, sum, root 0, out of place): all_reduce, all_gather,
// reduce_scatter, broadcast, alltoall (grouped ncclSend/ncclRecv to every peer, as NCCL
// implements it), sendrecv (to rank+1, from rank−1). For each requested size S (min..max,
// doubling), as nccl-tests computes them with n ranks and 4-byte floats:
//   all_reduce, broadcast, sendrecv:  count = S/4,                      size = 4·count
//   all_gather, reduce_scatter:       count = (S/4/n) rounded down to a multiple of 4 (16 B),
//                                     per rank,                         size = 4·count·n
//   alltoall:                         count = the same, per peer,       size = 4·count·n
// (sizes whose count is 0 are skipped). time = wall time of `iters` operations enqueued back to
// back after `warmup` ones, divided by `iters`, the max over ranks; algbw = size / time (GB/s =
// 1e9 B/s); busbw = algbw · factor with factor 2(n−1)/n (all_reduce), (n−1)/n (all_gather,
// reduce_scatter, alltoall), 1 (broadcast, sendrecv).
//
// Forcing algorithm and protocol: NCCL reads NCCL_ALGO and NCCL_PROTO when a communicator is
// initialised (ncclTopoTuneModel, src/graph/tuning.cc), not per call. So every (algorithm,
// protocol) combination gets a fresh communicator created after setenv: ncclCommInitAll in one
// process, ncclCommSplit of the bootstrap communicator with one process per GPU (which needs no
// new unique id). NCCL's own choice (the variables as the user left them: unset, or one name, see
// NcclPresets) is measured first as "default". Combinations and operations NCCL cannot run at all
// (plan_nccl_combinations: Simple-only algorithms with LL/LL128, NVLSTree on one host, PAT with
// several GPUs per host, CollNet without NCCL_COLLNET_ENABLE=1, tree for all_gather, ...) are left
// out with one line each at the start. A combination NCCL still rejects (at init, or "no
// algorithm/protocol available" when an operation is enqueued, e.g. NVLS without NVSwitch) is
// skipped with a note and records nothing for that operation. alltoall and sendrecv are point to
// point, which NCCL_ALGO does not affect, so they run only in combinations whose requested
// algorithm is "default" and record algorithm "default".
//
// Output and interrupts: `checkpoint` runs after every combination (rank 0's writes the file), so
// that a failure or a signal later leaves the samples measured so far (see interrupt.h). An interrupt of one rank of
// a multi-process run may leave the other ranks waiting until NCCL reports that the peer is gone.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "calibrate/bench/bench_options.h"
#include "calibrate/raw.pb.h"

namespace clustersim::bench {

struct LaunchEnv {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  bool local_rank_known = false;
  std::string launcher;  // "srun", "mpirun (Open MPI)", ...; empty without a launcher

  bool multi_process() const { return world > 1; }
};

// Reads the launcher variables listed in bench_help_text(). Throws UsageError when they are
// malformed (not integers, rank outside 0..world-1).
LaunchEnv detect_launch_env();

struct NcclParticipants {
  std::uint32_t hosts = 1;
  std::uint32_t gpus = 1;
  std::string launch_mode;
};

// The user's own NCCL settings, resolved before any NCCL call (clustersim_bench.cpp): what the
// "default" combination records, and whether CollNet algorithms can run.
struct NcclPresets {
  std::string algo = "default";  // preset_algo_label() of the effective NCCL_ALGO
  std::string proto = "default";
  bool collnet_enabled = false;  // effective NCCL_COLLNET_ENABLE is "1"
};

// Every process of a multi-process run calls this with its own GPU already current; only rank
// 0's `raw` receives the samples, and its provenance the hosts, GPUs and launch mode before the
// first sample. `checkpoint` runs after every combination, on every rank (it decides who writes).
// Throws BenchError on CUDA/NCCL failures other than rejected combinations, UsageError when a
// multi-process run has no way to share the NCCL id, Interrupted after SIGINT/SIGTERM.
NcclParticipants run_nccl_bench(const BenchOptions& options, const LaunchEnv& env, int device_count,
                                const NcclPresets& presets, schema::RawMeasurements& raw,
                                const std::function<void()>& checkpoint);

}  // namespace clustersim::bench
