// Scenario: the validated value types the simulator runs on. The CLI edge builds one from a
// .textproto/.json file (cli/scenario_loader.h); nothing below the CLI sees protobuf.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calibrate/hardware_profile.h"
#include "sim/units.h"
#include "topology/cluster_spec.h"
#include "workloads/model_spec.h"
#include "workloads/nccl_model.h"
#include "workloads/pipeline_schedule.h"

namespace clustersim::workloads {

// kFP8: FP8 training as NVIDIA Transformer Engine runs it — the transformer layers' linear-layer GEMMs in FP8
// (Op::fp8, workloads/transformer_ops.h), everything else, and all stored and exchanged tensors, as kBF16.
enum class Precision { kBF16, kFP16, kFP32, kTF32, kFP8 };

const char* to_string(Precision p);
// Bytes per element of weights, activations and gradients exchanged in this precision
// (mixed precision keeps fp32 master weights and optimizer state separately). FP8: 2 (BF16 tensors).
double element_bytes(Precision p);
// 16-bit weights and activations with fp32 master weights (BF16, FP16, and FP8, whose tensors are BF16).
bool sixteen_bit(Precision p);

// Activation recomputation (Korthikanti et al. 2022): none; selective = the attention core is recomputed
// in backward; full = every layer's forward is recomputed from its stored input.
enum class Recompute { kNone, kSelective, kFull };
// Attention kernels: explicit score matrices (B·a·s² elements stored) or FlashAttention (none stored).
enum class AttentionKernel { kExplicit, kFlash };
// Which FlashAttention implementation a flash job runs (parallel.proto FlashKernel). kGeneric: timed as a GEMM
// of the kernel's shape (compute_model.h); the others at the profile's published rate for that kernel.
enum class FlashKernel { kGeneric, kFa2, kFa3, kTriton };
const char* to_string(FlashKernel k);

enum class Optimizer { kSgd, kSgdMomentum, kAdam };   // Adam and AdamW keep the same state
// Gradient accumulation dtype: fp32 (Megatron's main_grad), the 16-bit weights' dtype, or 16-bit with the
// fp32 copy Megatron's float16 optimizer makes for the step (memory_model.h).
enum class GradientDtype { kFp32, k16Bit, k16BitFp32Copy };
const char* to_string(Optimizer o);
const char* to_string(GradientDtype g);

// Whose mechanics a job's step follows (parallel.proto Framework).
// kAuto: Megatron-LM when any model parallelism or Megatron-only option is set, DeepSpeed when
// zero_stage > 0, else PyTorch DDP (ParallelPlan::effective_framework()).
enum class Framework { kAuto, kPytorchDdp, kMegatron, kFsdp, kDeepSpeed, kDataParallel, kHorovod };
const char* to_string(Framework f);

struct ParallelPlan {
  std::uint32_t dp = 1;
  std::uint32_t micro_batch = 1;       // samples per micro-batch per GPU
  std::uint32_t grad_accum = 1;        // micro-batches per optimizer step (the pipeline's m)
  Bytes ddp_bucket = MiB(25);          // PyTorch DDP bucket_cap_mb = 25 (MiB)
  bool ddp_bucket_set = false;         // the scenario gave ddp_bucket_mib (else Megatron uses its own rule)
  std::uint32_t tp = 1;                // tensor parallel
  std::uint32_t pp = 1;                // pipeline stages
  std::uint32_t vp = 1;                // model chunks per stage
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  bool sequence_parallel = false;
  std::string rank_order = "tp-dp-pp";
  Recompute recompute = Recompute::kNone;
  AttentionKernel attention = AttentionKernel::kExplicit;
  FlashKernel flash_kernel = FlashKernel::kGeneric;  // with attention kFlash
  bool distributed_optimizer = false;  // Megatron's ZeRO-1: reduce-scatter gradients, all-gather parameters
  bool pp_scatter_gather = false;      // pipeline sends split 1/tp, all-gathered by the receiving TP group
  bool overlap_grad_reduce = false;    // Megatron: DP buckets during the backward (else after it)
  bool tp_comm_overlap = false;        // Megatron: TP collectives beside the GEMMs (TE userbuffers)
  bool overlap_param_gather = false;   // Megatron: parameter all-gathers beside the next step's first forward
  bool async_tp_grad_reduce = true;    // Megatron: backward TP reductions beside the weight-gradient GEMMs
  Framework framework = Framework::kAuto;
  std::uint32_t zero_stage = 0;        // FSDP / DeepSpeed: 1, 2 or 3
  bool hybrid_shard = false;           // shard within a node, replicate across nodes
  Bytes horovod_fusion = MiB(128);     // Horovod tensor fusion buffer
  Seconds horovod_cycle = seconds(1e-3);
  bool horovod_hierarchical = false;
  std::uint32_t cp = 1;                // context parallel
  std::uint32_t ep = 1;                // expert parallel (divides dp)
  double moe_capacity_factor = 0;      // 0: dropless
  double moe_token_skew = 0;           // 0: uniform routing

  std::uint32_t gpus() const { return dp * tp * pp * cp; }
  // Without a framework: Megatron-LM for model parallelism or its distributed optimizer; DeepSpeed for a ZeRO
  // stage (which takes recompute and FlashAttention); else Megatron-LM for recompute or FlashAttention (the
  // features the scenario format had for Megatron first); else PyTorch DDP.
  Framework effective_framework() const {
    if (framework != Framework::kAuto) return framework;
    if (tp > 1 || pp > 1 || cp > 1 || ep > 1 || distributed_optimizer) return Framework::kMegatron;
    if (zero_stage > 0) return Framework::kDeepSpeed;
    if (recompute != Recompute::kNone || attention != AttentionKernel::kExplicit) return Framework::kMegatron;
    return Framework::kPytorchDdp;
  }
  // The Megatron-LM graph (megatron_graph.h) runs model-parallel layouts and whatever only it models.
  bool megatron() const { return effective_framework() == Framework::kMegatron; }
};

// The most micro-batch steps a training run may count: 2^53, the range in which a double holds every integer
// (at 1 ms a step, 285,000 years). More is a typo (epochs: 1e300) and is refused where it is read.
inline constexpr double kMaxTrainingSteps = 9007199254740992.0;

struct TrainingJob {
  double samples_per_epoch = 0;        // sequences
  double epochs = 1;
  std::uint64_t global_batch = 0;      // samples per optimizer step
  Precision precision = Precision::kBF16;
  Optimizer optimizer = Optimizer::kAdam;
  GradientDtype gradients = GradientDtype::kFp32;
  double loader_samples_per_s_per_node = 0;   // 0: the data loader is never the bottleneck
  std::uint32_t loader_prefetch = 2;          // micro-batches the loader queue holds at the start of a step
  BytesPerSecond host_to_device = GBps(24);   // per GPU, for each micro-batch's input copy
  Seconds host_dispatch_per_kernel = seconds(0);  // host CPU time per dispatched kernel; 0: not modelled
};

// How collectives are timed: FLOW runs each collective as flows on the topology, sharing links
// max-min with all other traffic (congestion-aware, the default); ANALYTICAL uses the closed form
// (no contention between concurrent collectives).
enum class Fidelity { kFlow, kAnalytical };
const char* to_string(Fidelity f);

// One training job on a set of the cluster's GPUs. Several jobs on disjoint GPU sets of one cluster
// run at the same time and share the fabric.
struct Job {
  std::string name;
  std::vector<std::uint32_t> gpus;     // global GPU indices, ascending; rank r runs on gpus[r]
  ModelSpec model;
  ParallelPlan parallel;
  TrainingJob training;
};

struct Scenario {
  std::string name;
  std::string source_file;             // where it came from, for reports
  topology::ClusterSpec cluster;
  std::string profile_ref;              // the profile as the scenario names it: built-in name or path
  calibrate::HardwareProfile profile;
  Fidelity fidelity = Fidelity::kFlow;
  NcclSettings nccl;                   // forced algorithm / protocol (NCCL_ALGO, NCCL_PROTO)
  std::vector<Job> jobs;               // at least one
};

}  // namespace clustersim::workloads
