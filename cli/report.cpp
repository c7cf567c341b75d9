#include "cli/report.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "calibrate/proto_text.h"
#include "cli/command_line.h"
#include "cli/html_report.h"
#include "sim/input_error.h"
#include "sim/trace.h"
#include "topology/communicator_span.h"
#include "workloads/compute_model.h"
#include "workloads/input_pipeline.h"
#include "workloads/rank_layout.h"
#include "workloads/transformer_ops.h"

namespace clustersim::cli {
namespace {

// Which kernels the job's ops are timed with (workloads/transformer_ops.h: OpConfig::eager, OpConfig::autocast).
std::string kernels_text(const workloads::ParallelPlan& p, workloads::Precision precision) {
  if (p.megatron()) return "; Megatron-LM's fused kernels";
  const workloads::Framework fw = p.effective_framework();
  if (fw == workloads::Framework::kFsdp || fw == workloads::Framework::kDeepSpeed)
    return std::string("; eager PyTorch kernels in ") + to_string(precision) + " (16-bit parameters, no autocast)";
  return workloads::eager_autocast(precision) ? "; eager PyTorch kernels under autocast (fp32 parameters)"
                                              : "; eager PyTorch kernels";
}

// "; FlashAttention (FA2)" for a flash job, naming the kernel implementation (parallel.flash_kernel); "" else.
std::string attention_text(const workloads::ParallelPlan& p) {
  if (p.attention != workloads::AttentionKernel::kFlash) return "";
  return p.flash_kernel == workloads::FlashKernel::kGeneric
             ? "; FlashAttention (GEMM-shaped)"
             : std::string("; FlashAttention (") + workloads::to_string(p.flash_kernel) + ")";
}


// "1,234,567" for counts.
std::string grouped(std::uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string pct(double part, double whole) { return fmt("%5.1f %%", whole > 0 ? 100 * part / whole : 0); }

// The schedule's theoretical bubble as a share of the step, like the idle share beside it: the theory gives it
// as a fraction f of the ideal (bubble-free) time, so of the step it is f / (1 + f): (p−1)/(m+p−1) for 1F1B and
// GPipe, (p−1)/(v·m+p−1) interleaved.
double bubble_share_of_step(const workloads::ParallelPlan& p) {
  const double f = workloads::ideal_bubble_fraction(p.schedule, p.pp, p.grad_accum, p.vp);
  return f / (1 + f);
}

// The order the ranks are laid out in, fastest first, as Megatron names it: cp where the layout puts it (unnamed:
// right after tp) and ep (consecutive data-parallel ranks) when they are above 1.
std::string rank_order_text(const workloads::ParallelPlan& p) {
  std::string s = p.rank_order;
  if (p.cp > 1 && s.find("cp") == std::string::npos) s.insert(s.find("tp") + 2, "-cp");
  if (p.ep > 1) s.insert(s.find("dp"), "ep-");
  return s;
}

// A note when the job's TP groups leave NVLink: every TP collective (several per layer and micro-batch) then
// crosses the network, which a layout normally avoids (`sweep` rejects such layouts).
std::string tp_span_note(const workloads::Scenario& sc, const workloads::Job& job) {
  const auto& p = job.parallel;
  if (p.tp < 2 || job.gpus.size() != std::size_t{p.tp} * p.cp * p.dp * p.pp) return "";
  const workloads::RankLayout layout(p.tp, p.dp, p.pp, p.rank_order, p.cp);
  std::size_t crossing = 0, groups = 0;
  for (const std::vector<std::uint32_t>& group : layout.groups(workloads::ParallelDim::kTensor)) {
    ++groups;
    const std::uint32_t first = topology::domain_of(sc.cluster, job.gpus[group[0]]);
    for (std::uint32_t r : group)
      if (topology::domain_of(sc.cluster, job.gpus[r]) != first) {
        ++crossing;
        break;
      }
  }
  if (crossing == 0) return "";
  return "  note       " + std::to_string(crossing) + " of " + std::to_string(groups) +
         " TP groups span more than one NVLink domain: their collectives cross the network\n";
}

// The MFU of a run against the BF16 peak: FP8 runs are often quoted so too (the same model FLOPs, half the peak).
double mfu_against_bf16_peak(const workloads::Job& job, const workloads::IterationResult& r,
                             const calibrate::GpuPerformance& gpu) {
  const FlopsPerSecond bf16 = workloads::tensor_peak(gpu, workloads::Precision::kBF16);
  return r.model_flops_per_step.raw() / (r.iteration_time.raw() * double(job.gpus.size()) * bf16.raw());
}

// How the MFU counts: the convention, and for a MoE job whose capacity factor drops routed tokens, that the
// dropped ones are not counted (tokens/s counts every token: the two move apart as the drops change).
std::string mfu_convention(const workloads::Job& job) {
  std::string s =
      "model FLOPs: all GEMMs incl. attention scores and LM head, fwd + bwd (2x fwd), no recomputation, "
      "no causal discount (Korthikanti et al. 2022); peak = dense tensor peak of the precision";
  const double routed =
      workloads::routed_fraction_computed(job.model, job.parallel.moe_capacity_factor, job.parallel.moe_token_skew);
  if (routed < 1)
    s += "; the experts' FLOPs count the " + fmt("%.1f", 100 * routed) +
         " % of routed tokens the capacity factor keeps (the dropped ones are not computed)";
  return s;
}

}  // namespace

namespace {

void job_summary(std::ostringstream& o, const workloads::Scenario& sc, const workloads::Job& job,
                 const workloads::IterationResult& r, bool several) {
  const char* unit = accelerator_noun(sc.cluster);
  using workloads::to_string;
  const auto& m = job.model;
  const auto& p = job.parallel;
  const auto& t = job.training;
  const auto gpus = static_cast<double>(job.gpus.size());
  if (several) o << "Job \"" << job.name << "\" on GPUs " << gpu_ranges_text(job.gpus) << "\n";
  o << "  model      " << m.name << ": " << fmt("%.3f", m.parameter_count() / 1e9) << " B parameters, " << m.layers
    << " layers, hidden " << m.hidden << ", " << m.heads << " heads, FFN " << m.ffn_hidden << ", vocab " << m.vocab
    << ", sequence " << m.seq_len << "\n";
  if (p.megatron()) {
    o << "  parallel   Megatron 3D: TP " << p.tp << (p.sequence_parallel ? " (+SP)" : "")
      << (p.cp > 1 ? " x CP " + std::to_string(p.cp) : "") << " x PP " << p.pp
      << (p.vp > 1 ? " (vp " + std::to_string(p.vp) + ")" : "") << " x DP " << p.dp
      << (p.ep > 1 ? " (EP " + std::to_string(p.ep) + " within DP)" : "")
      << (p.pp > 1 ? std::string(", ") + workloads::to_string(p.schedule) : std::string(", no pipeline"))
      << ", rank order " << rank_order_text(p) << "; micro-batch " << p.micro_batch << " x " << p.grad_accum
      << " micro-batches x DP " << p.dp << " = global batch " << t.global_batch << " samples; "
      << to_string(t.precision) << attention_text(p) << kernels_text(p, t.precision)
      << (p.distributed_optimizer
              ? (p.overlap_param_gather ? "; distributed optimizer (parameter all-gathers beside the next forward)"
                                        : "; distributed optimizer")
              : "")
      << (p.overlap_grad_reduce ? "; gradient reduction overlapped" : "; gradient reduction after backward")
      << (p.pp_scatter_gather ? "; scatter/gather sends" : "")
      << (p.tp_comm_overlap ? "; TP collectives overlapped with GEMMs" : "") << "\n"
      << tp_span_note(sc, job) << "\n";
  } else if (p.effective_framework() != workloads::Framework::kPytorchDdp) {
    const workloads::Framework fw = p.effective_framework();
    o << "  parallel   " << workloads::to_string(fw) << ": DP " << p.dp << " x micro-batch " << p.micro_batch
      << " x grad-accum " << p.grad_accum << " = global batch " << t.global_batch << " samples";
    if (fw == workloads::Framework::kFsdp || fw == workloads::Framework::kDeepSpeed)
      o << "; ZeRO stage " << p.zero_stage << (p.hybrid_shard ? ", sharded within each node, replicated across" : "");
    if (fw == workloads::Framework::kHorovod)
      o << "; fusion buffer " << fmt("%g", p.horovod_fusion.raw() / 1048576.0) << " MiB, cycle "
        << fmt("%g", p.horovod_cycle.raw() * 1e3) << " ms" << (p.horovod_hierarchical ? ", hierarchical AllReduce" : "");
    o << "; " << to_string(t.precision) << attention_text(p) << kernels_text(p, t.precision) << "\n\n";
  } else {
    o << "  parallel   PyTorch DDP: DP " << p.dp << " x micro-batch " << p.micro_batch << " x grad-accum "
      << p.grad_accum << " = global batch " << t.global_batch << " samples; " << r.buckets.size()
      << " gradient buckets (first 1 MiB, then " << fmt("%g", p.ddp_bucket.raw() / 1048576.0) << " MiB"
      << (p.dp == 1 ? "; nothing to all-reduce at DP 1" : "") << "); " << to_string(t.precision) << attention_text(p)
      << kernels_text(p, t.precision) << "\n\n";
  }
  const double it = r.iteration_time.raw();
  o << "Iteration (one optimizer step)\n";
  o << "  iteration time    " << fmt("%.6f", it) << " s\n";
  o << "  tokens/s          " << fmt("%.0f", r.tokens_per_s) << "  (" << fmt("%.0f", r.tokens_per_s / gpus) << " per "
    << unit << ")\n";
  o << "  samples/s         " << fmt("%.2f", r.samples_per_s) << "\n";
  o << "  MFU               " << fmt("%.1f", 100 * r.mfu) << " %  ("
    << fmt("%.1f", to_TFLOPps(r.model_flops_per_step / r.iteration_time) / gpus) << " model TFLOP/s per " << unit
    << " of " << fmt("%g", to_TFLOPps(workloads::tensor_peak(sc.profile.gpu, t.precision))) << ")\n";
  o << "                    " << mfu_convention(job) << "\n";
  if (r.mfu > 1)
    o << "                    above 100 %: the full-square convention counts the causally masked half of each "
         "attention square, which the kernels skip (see MFU (causal))\n";
  if (t.precision == workloads::Precision::kFP8) {
    const FlopsPerSecond bf16 = workloads::tensor_peak(sc.profile.gpu, workloads::Precision::kBF16);
    o << "  MFU (BF16 peak)   " << fmt("%.1f", 100 * mfu_against_bf16_peak(job, r, sc.profile.gpu))
      << " %  (the same model TFLOP/s over the " << fmt("%g", to_TFLOPps(bf16))
      << " BF16 peak, as BF16-referenced comparisons quote FP8 runs)\n";
  }
  o << "  MFU (causal)      " << fmt("%.1f", 100 * r.mfu_causal)
    << " %  (the same with half of each attention square, as causal kernels compute it)\n";
  o << "  HFU               " << fmt("%.1f", 100 * r.hfu)
    << " %  (hardware FLOPs: the model FLOPs plus the recomputed forward)\n";
  // Selective recomputation re-runs the attention core's forward: QK^T and softmax x V, 2 x 2·b·s²·h per layer.
  // Korthikanti et al.'s HFU formula for it, 72·B·s·l·h²·(1 + s/(3h) + V/(12·l·h)), adds three times that
  // (12·b·s²·h per layer, the core's forward and backward again), so its HFU is higher than this one.
  if (p.recompute == workloads::Recompute::kSelective)
    o << "                    selective recompute adds the attention core's forward, 4·b·s²·h FLOPs per layer;\n"
         "                    Korthikanti et al.'s HFU formula 72·B·s·l·h²·(1 + s/(3h) + V/(12·l·h)) counts "
         "12·b·s²·h\n";
  o << "\n";

  o << "Where the time goes (" << unit << " " << r.breakdown_gpu << ", the one with the most exposed communication)\n";
  o << "  compute           " << fmt("%.6f", r.breakdown.compute.raw()) << " s  " << pct(r.breakdown.compute.raw(), it)
    << "\n";
  if (r.breakdown.compute_eager.raw() > 0)
    o << "    of which eager  " << fmt("%.6f", r.breakdown.compute_eager.raw()) << " s  "
      << pct(r.breakdown.compute_eager.raw(), it)
      << "   (PyTorch autocast: weight and gradient casts, accumulation into .grad)\n";
  o << "  exposed comm      " << fmt("%.6f", r.breakdown.exposed_comm.raw()) << " s  "
    << pct(r.breakdown.exposed_comm.raw(), it)
    << [&] {
         switch (p.effective_framework()) {
           case workloads::Framework::kMegatron:
             return "   (TP collectives, and pipeline/DP transfers not hidden behind compute)\n";
           case workloads::Framework::kFsdp:
           case workloads::Framework::kDeepSpeed:
             return "   (parameter all-gathers and gradient reduce-scatters not hidden behind compute)\n";
           case workloads::Framework::kDataParallel:
             return "   (input scatter, parameter broadcast, output gather, gradient reduce via GPU 0)\n";
           case workloads::Framework::kHorovod:
             return "   (fused AllReduces not hidden behind backward)\n";
           default: return "   (DP gradient AllReduce not hidden behind backward)\n";
         }
       }();
  if (r.breakdown.exposed_comm.raw() > 0) {
    std::string kinds;
    for (std::size_t k = 0; k < workloads::kCommKinds; ++k) {
      const double v = r.breakdown.exposed_by_kind[k].raw();
      if (v <= 0) continue;
      kinds += (kinds.empty() ? "" : ", ") + std::string(workloads::label(static_cast<workloads::CommKind>(k))) + " " +
               fmt("%.6f", v) + " s";
    }
    o << "    by kind         " << kinds << "   (where kinds overlap: the first of TP, CP, EP, PP, DP)\n";
  }
  if (r.breakdown.exposed_input.raw() > 0)
    o << "  input stall       " << fmt("%.6f", r.breakdown.exposed_input.raw()) << " s  "
      << pct(r.breakdown.exposed_input.raw(), it) << "   (data loader / host-to-device copy, nothing else running)\n";
  if (r.breakdown.exposed_input.raw() > 0 || t.loader_samples_per_s_per_node > 0) {
    // The input side's assumptions (input_pipeline.h), so a stall (or its absence) can be checked.
    const InputModelText input = input_model_text(job);
    o << "    input model     " << input.loader << "\n                    " << input.copy << "\n";
  }
  if (r.breakdown.exposed_host.raw() > 0)
    o << "  host dispatch     " << fmt("%.6f", r.breakdown.exposed_host.raw()) << " s  "
      << pct(r.breakdown.exposed_host.raw(), it) << "   (the GPU waits for the host thread to issue kernels)\n";
  o << "  idle              " << fmt("%.6f", r.breakdown.idle.raw()) << " s  " << pct(r.breakdown.idle.raw(), it)
    << (p.pp > 1
            ? "   (incl. the pipeline bubble; theory " + fmt("%.1f", 100 * bubble_share_of_step(p)) + " % of the step)"
            : "")
    << "\n\n";

  o << "Memory per " << unit << " (peak";
  if (r.stage_peak_memory.size() > 1) {
    const auto lightest = std::min_element(r.stage_peak_memory.begin(), r.stage_peak_memory.end());
    o << ", on pipeline stage " << r.memory_stage << " of " << r.stage_peak_memory.size()
      << ", the most loaded; the least loaded, stage " << (lightest - r.stage_peak_memory.begin()) << ", peaks at "
      << fmt("%.2f", to_GiB(*lightest)) << " GiB";
  }
  o << ")\n";
  for (const auto& part : r.memory.parts)
    o << "  " << part.name << std::string(part.name.size() < 68 ? 68 - part.name.size() : 1, ' ')
      << fmt("%8.2f", to_GiB(part.size)) << " GiB\n";
  o << "  peak " << fmt("%.2f", to_GiB(r.memory.peak)) << " GiB of " << fmt("%.2f", to_GiB(r.memory.capacity))
    << " GiB: " << (r.memory.oom ? "OUT OF MEMORY (capacity exceeded when adding: " + r.memory.breaking_part +
                              "; largest part: " + r.memory.largest_part + ")"
                        : "fits") << "\n\n";

  o << "Training time\n";
  o << "  optimizer steps   " << grouped(r.training.optimizer_steps) << "  (= " << fmt("%g", t.epochs) << " epoch(s) x "
    << fmt("%.10g", t.samples_per_epoch) << " samples / global batch " << t.global_batch;
  if (const double exact = t.epochs * t.samples_per_epoch / double(t.global_batch);
      std::fabs(double(r.training.optimizer_steps) - exact) > 1e-9 * exact && exact < 1e15) {
    o << " = " << fmt("%.10g", exact);
    if (!p.megatron() && t.epochs >= 2)  // workloads::run_optimizer_steps
      o << ", rounded up per epoch: a PyTorch DataLoader ends each epoch with a partial batch, timed as a whole step";
    else
      o << ", rounded up: the last step is partial and timed as a whole one";
  }
  o << ")\n";
  o << "  micro-batch steps " << grouped(r.training.micro_batch_steps) << "  (= optimizer steps x grad-accum "
    << p.grad_accum << ")\n";
  o << "  time to train     " << human_duration(r.training.time_to_train) << "  ("
    << fmt("%.1f", r.training.time_to_train.raw()) << " s = optimizer steps x iteration time)\n";
  // Three significant digits below one GPU-hour (a short study's 0.00441 is no 0.0).
  std::string hours_label = std::string(unit) + "-hours";
  hours_label.resize(18, ' ');  // the labels' column
  o << "  " << hours_label << fmt(r.training.gpu_hours < 1 ? "%.3g" : "%.1f", r.training.gpu_hours) << "\n";
  if (r.memory.oom)
    o << "  (the job runs OUT OF MEMORY as configured: these are the times it would take if it fitted)\n";
}

std::string job_json(const workloads::Job& job, const workloads::IterationResult& r, const std::string& indent,
                     const calibrate::GpuPerformance& gpu) {
  using sim::format_number;
  using sim::json_escape;
  std::ostringstream o;
  auto num = [](double v) { return format_number(v); };
  auto breakdown = [&](const workloads::TimeBreakdown& b) {
    std::string kinds;
    for (std::size_t k = 0; k < workloads::kCommKinds; ++k)
      kinds += std::string(", \"exposed_") + workloads::to_string(static_cast<workloads::CommKind>(k)) +
               "\": " + num(b.exposed_by_kind[k].raw());
    return "{\"compute\": " + num(b.compute.raw()) + ", \"exposed_comm\": " + num(b.exposed_comm.raw()) + kinds +
           ", \"exposed_input\": " + num(b.exposed_input.raw()) + ", \"exposed_host\": " + num(b.exposed_host.raw()) +
           ", \"idle\": " + num(b.idle.raw()) + "}";
  };
  const std::string& in = indent;
  o << in << "\"job\": \"" << json_escape(job.name) << "\",\n";
  o << in << "\"job_gpus\": \"" << gpu_ranges_text(job.gpus) << "\",\n";
  o << in << "\"parameters\": " << num(job.model.parameter_count()) << ",\n";
  o << in << "\"global_batch\": " << job.training.global_batch << ",\n";
  o << in << "\"iteration_time_s\": " << num(r.iteration_time.raw()) << ",\n";
  o << in << "\"tokens_per_s\": " << num(r.tokens_per_s) << ",\n";
  o << in << "\"tokens_per_s_per_gpu\": " << num(r.tokens_per_s / double(job.gpus.size())) << ",\n";
  o << in << "\"samples_per_s\": " << num(r.samples_per_s) << ",\n";
  o << in << "\"model_flops_per_step\": " << num(r.model_flops_per_step.raw()) << ",\n";
  o << in << "\"mfu\": " << num(r.mfu) << ",\n";
  o << in << "\"mfu_convention\": \"" << json_escape(mfu_convention(job)) << "\",\n";
  o << in << "\"mfu_peak_TFLOPps\": " << num(to_TFLOPps(workloads::tensor_peak(gpu, job.training.precision)))
    << ",\n";
  if (job.training.precision == workloads::Precision::kFP8)  // as the text's "MFU (BF16 peak)"
    o << in << "\"mfu_bf16_peak\": " << num(mfu_against_bf16_peak(job, r, gpu)) << ",\n";
  o << in << "\"mfu_causal\": " << num(r.mfu_causal) << ",\n";
  o << in << "\"hfu\": " << num(r.hfu) << ",\n";
  o << in << "\"hardware_flops_per_step\": " << num(r.hardware_flops_per_step.raw()) << ",\n";
  o << in << "\"breakdown_gpu\": " << r.breakdown_gpu << ",\n";
  o << in << "\"breakdown_s\": " << breakdown(r.breakdown) << ",\n";
  // Of breakdown_s.compute: PyTorch eager mixed-precision work (DDP, Horovod, DataParallel), 0 otherwise.
  o << in << "\"compute_eager_s\": " << num(r.breakdown.compute_eager.raw()) << ",\n";
  // The schedule's theoretical bubble as a share of the step, beside the simulated idle share (pipelines only).
  if (job.parallel.pp > 1)
    o << in << "\"theoretical_bubble_share\": " << num(bubble_share_of_step(job.parallel)) << ",\n";
  o << in << "\"per_gpu_breakdown_s\": [";
  for (std::size_t g = 0; g < r.per_gpu.size(); ++g)
    o << (g ? ",\n  " : "\n  ") << in << "{\"gpu\": " << job.gpus[g] << ", \"s\": " << breakdown(r.per_gpu[g]) << "}";
  o << "\n" << in << "],\n";
  o << in << "\"buckets\": [";
  for (std::size_t b = 0; b < r.buckets.size(); ++b)
    o << (b ? ",\n  " : "\n  ") << in << "{\"bytes\": " << num(r.buckets[b].size.raw())
      << ", \"parameters\": " << num(r.buckets[b].parameters) << ", \"first\": \"" << json_escape(r.buckets[b].first_op)
      << "\", \"last\": \"" << json_escape(r.buckets[b].last_op) << "\""
      << (b < r.bucket_allreduce.size() ? ", \"allreduce_s\": " + num(r.bucket_allreduce[b].raw()) : "") << "}";
  o << "\n" << in << "],\n";
  o << in << "\"memory\": {\"peak_bytes\": " << num(r.memory.peak.raw())
    << ", \"capacity_bytes\": " << num(r.memory.capacity.raw()) << ", \"oom\": " << (r.memory.oom ? "true" : "false");
  if (r.memory.oom) o << ", \"breaking_part\": \"" << json_escape(r.memory.breaking_part) << "\"";
  o << ", \"largest_part\": \"" << json_escape(r.memory.largest_part) << "\"";
  if (!r.stage_peak_memory.empty()) {
    o << ", \"stage\": " << r.memory_stage << ", \"stage_peak_bytes\": [";
    for (std::size_t s = 0; s < r.stage_peak_memory.size(); ++s)
      o << (s ? ", " : "") << num(r.stage_peak_memory[s].raw());
    o << "]";
  }
  o << ", \"parts_bytes\": {";
  for (std::size_t i = 0; i < r.memory.parts.size(); ++i)
    o << (i ? ", " : "") << "\"" << json_escape(r.memory.parts[i].name) << "\": " << num(r.memory.parts[i].size.raw());
  o << "}},\n";
  o << in << "\"training\": {\"optimizer_steps\": " << r.training.optimizer_steps
    << ", \"micro_batch_steps\": " << r.training.micro_batch_steps
    << ", \"time_to_train_s\": " << num(r.training.time_to_train.raw())
    << ", \"gpu_hours\": " << num(r.training.gpu_hours) << "}";
  return o.str();
}

}  // namespace

InputModelText input_model_text(const workloads::Job& job) {
  const workloads::TrainingJob& t = job.training;
  InputModelText out;
  out.loader = t.loader_samples_per_s_per_node > 0
                   ? "loader " + fmt("%g", t.loader_samples_per_s_per_node) + " samples/s per node, queue of " +
                         std::to_string(t.loader_prefetch) + " micro-batch(es) (filled during the previous step)"
                   : "no loader rate (the data loader is never the bottleneck)";
  out.copy = "host-to-device copy " +
             grouped(std::uint64_t(workloads::micro_batch_input_bytes(job.model, job.parallel.micro_batch).raw())) +
             " B per micro-batch (int64 tokens) at " + fmt("%g", t.host_to_device.raw() / 1e9) +
             " GB/s, on its own stream, overlapping compute";
  return out;
}

std::string summary_text(const workloads::Scenario& sc, const workloads::ScenarioResult& result) {
  std::ostringstream o;
  o << "clustersim run: " << sc.name << "\n";
  o << "  scenario   " << sc.source_file << "\n";
  o << "  profile    " << sc.profile.name << " (" << sc.profile.origin << ")\n";
  o << "  cluster    " << cluster_text(sc) << "\n";
  o << "  fidelity   " << workloads::to_string(sc.fidelity)
    << (sc.fidelity == workloads::Fidelity::kFlow ? " (collectives as flows sharing the links max-min)"
                                                  : " (closed-form collectives, no contention)")
    << "\n";
  if (result.symmetry_reduced && sc.jobs.size() == 1) {
    const workloads::IterationResult& r = result.jobs[0];
    const std::uint32_t dp = sc.jobs[0].parallel.dp, tp = sc.jobs[0].parallel.tp;
    std::vector<std::string> why;
    if (r.simulated_replicas != dp)
      why.push_back("the " + std::to_string(dp) + " data-parallel replicas are " +
                    (r.simulated_replicas == 1
                         ? std::string("identical")
                         : std::to_string(dp / r.simulated_replicas) + " identical EP groups of " +
                               std::to_string(r.simulated_replicas)));
    if (r.simulated_tensor_ranks != tp)
      why.push_back("tensor ranks " + std::to_string(r.simulated_tensor_ranks - 1) + "-" + std::to_string(tp - 1) +
                    " of each TP group run alike");
    o << "  symmetry   simulated " << r.simulated_ranks << " of " << sc.jobs[0].gpus.size() << " GPUs: " << why[0]
      << (why.size() > 1 ? " and " + why[1] : std::string()) << " (" << workloads::to_string(sc.fidelity)
      << " fidelity)\n";
  }
  const bool several = sc.jobs.size() > 1;
  if (several) o << "  jobs       " << sc.jobs.size() << ", sharing the cluster's fabric\n";
  o << (several ? "\n" : "");
  for (std::size_t j = 0; j < sc.jobs.size(); ++j) {
    if (j) o << "\n";
    job_summary(o, sc, sc.jobs[j], result.jobs[j], several);
  }
  return o.str();
}

std::string result_json(const workloads::Scenario& sc, const workloads::ScenarioResult& result) {
  using sim::json_escape;
  std::ostringstream o;
  o << "{\n";
  o << "  \"scenario\": \"" << json_escape(sc.name) << "\",\n";
  o << "  \"scenario_file\": \"" << json_escape(sc.source_file) << "\",\n";
  o << "  \"profile\": \"" << json_escape(sc.profile.name) << "\",\n";
  o << "  \"fidelity\": \"" << workloads::to_string(sc.fidelity) << "\",\n";
  o << "  \"gpus\": " << sc.cluster.gpu_count() << ",\n";
  // With one job its results are also the top-level keys; with several, read "jobs".
  if (sc.jobs.size() == 1) o << job_json(sc.jobs[0], result.jobs[0], "  ", sc.profile.gpu) << ",\n";
  o << "  \"jobs\": [";
  for (std::size_t j = 0; j < sc.jobs.size(); ++j)
    o << (j ? ",\n" : "\n") << "    {\n" << job_json(sc.jobs[j], result.jobs[j], "      ", sc.profile.gpu) << "\n    }";
  o << "\n  ],\n";
  o << "  \"simulator\": {\"tasks\": " << result.tasks << ", \"events\": " << result.events
    << ", \"symmetry_reduced\": " << (result.symmetry_reduced ? "true" : "false")
    << ", \"simulated_gpus\": " << result.simulated_gpus << "}\n";
  o << "}\n";
  return o.str();
}

std::string link_usage_json(const workloads::ScenarioResult& r) {
  using sim::format_number;
  using sim::json_escape;
  std::ostringstream o;
  const double span = r.makespan.raw();
  o << "{\n  \"makespan_s\": " << format_number(span) << ",\n  \"links\": [";
  for (std::size_t i = 0; i < r.links.size(); ++i) {
    const workloads::LinkUsage& l = r.links[i];
    o << (i ? ",\n" : "\n") << "    {\"link\": \"" << json_escape(l.name) << "\", \"kind\": \"" << l.kind
      << "\", \"capacity_GBps\": " << format_number(to_GBps(l.capacity))
      << ", \"bytes_carried\": " << format_number(l.bytes_carried.raw()) << ", \"busy_s\": " << format_number(l.busy.raw())
      << ", \"busy_fraction\": " << format_number(span > 0 ? l.busy.raw() / span : 0)
      << ", \"mean_GBps_while_busy\": "
      << format_number(l.busy.raw() > 0 ? l.bytes_carried.raw() / l.busy.raw() / 1e9 : 0)
      << ", \"peak_flows\": " << l.peak_flows << "}";
  }
  o << "\n  ]\n}\n";
  return o.str();
}

std::string link_usage_csv(const workloads::ScenarioResult& r) {
  using sim::format_number;
  std::ostringstream o;
  const double span = r.makespan.raw();
  o << "link,kind,capacity_GBps,bytes_carried,busy_s,busy_fraction,mean_GBps_while_busy,peak_flows\n";
  for (const workloads::LinkUsage& l : r.links)
    o << l.name << "," << l.kind << "," << format_number(to_GBps(l.capacity)) << ","
      << format_number(l.bytes_carried.raw()) << "," << format_number(l.busy.raw()) << ","
      << format_number(span > 0 ? l.busy.raw() / span : 0) << ","
      << format_number(l.busy.raw() > 0 ? l.bytes_carried.raw() / l.busy.raw() / 1e9 : 0) << "," << l.peak_flows
      << "\n";
  return o.str();
}

namespace {

// Where the bytes of `path` end up: a symbolic link is followed (to its final target, which may not exist yet),
// so that writing replaces the target's content and keeps the link.
std::filesystem::path output_target(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p = path;
  for (int hops = 0; hops < 40; ++hops) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return p;
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) return p;
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  throw InputError(path, 0, 0, "", "cannot write output file: too many levels of symbolic links");
}

}  // namespace

bool is_stream_output(const std::string& path) {
  return path == "-" || path.starts_with("/dev/") || path.starts_with("/proc/");
}

void check_output_path(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) throw InputError("command line", 0, 0, "", "an output file name is empty");
  if (path == "-") return;
  if (is_stream_output(path)) {
    if (::access(path.c_str(), W_OK) != 0)
      throw InputError(path, 0, 0, "", std::string("cannot write output file: ") + std::strerror(errno));
    return;
  }
  const fs::path target = output_target(path);
  std::error_code ec;
  const fs::file_status st = fs::status(target, ec);
  if (fs::is_directory(st)) throw InputError(path, 0, 0, "", "cannot write output file: it is a directory");
  if (fs::is_regular_file(st) && calibrate::was_read_as_input(path))
    throw InputError(path, 0, 0, "",
                     "cannot write output file: this command read it as an input (a scenario's "
                     "profile, a fit's base); writing it would overwrite it");
  if (fs::exists(st)) {
    if (::access(target.c_str(), W_OK) != 0)
      throw InputError(path, 0, 0, "", std::string("cannot write output file: ") + std::strerror(errno));
    return;
  }
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    throw InputError(path, 0, 0, "", "cannot write output file: folder " + dir.string() + " does not exist");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw InputError(path, 0, 0, "", std::string("cannot write output file: ") + std::strerror(errno));
  // A name the file system would refuse only when the file is created (after the simulation, after the text
  // output): too long a name in this folder, or too long a path.
  const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX), path_max = ::pathconf(dir.c_str(), _PC_PATH_MAX);
  const std::size_t name = target.filename().string().size();
  if (name_max > 0 && name > static_cast<std::size_t>(name_max))
    throw InputError(path, 0, 0, "",
                     "cannot write output file: its name has " + std::to_string(name) + " characters, more than the " +
                         std::to_string(name_max) + " this folder's file system allows");
  if (path_max > 0 && fs::absolute(target, ec).string().size() >= static_cast<std::size_t>(path_max))
    throw InputError(path, 0, 0, "",
                     "cannot write output file: the path is longer than the " + std::to_string(path_max) +
                         " characters the system allows");
}

void write_file_atomically(const std::string& path, const std::string& content) {
  write_file_atomically(path, [&](std::ostream& out) { out.write(content.data(), static_cast<std::streamsize>(content.size())); });
}

namespace {

// Temporary files being written, removed by a SIGINT/SIGTERM/SIGHUP handler before the process dies: a trace of
// a large job is gigabytes, and Ctrl-C while it is written would leave it behind under a hidden name. The handler
// only reads these slots and calls unlink, signal and raise, which are async-signal-safe.
struct TempSlot {
  std::atomic<int> state{0};  // 0 free, 1 being filled in, 2 a file to remove
  char path[4096];
};
TempSlot g_temp_slots[16];

extern "C" void remove_temp_files_and_die(int sig) {
  for (TempSlot& slot : g_temp_slots)
    if (slot.state.load() == 2) ::unlink(slot.path);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Registers a temporary file for the handler while it exists (no slot: it is simply not cleaned on a signal).
class TempFileGuard {
 public:
  explicit TempFileGuard(const std::string& path) {
    static const bool installed = [] {
      for (int sig : {SIGINT, SIGTERM, SIGHUP})
        if (std::signal(sig, remove_temp_files_and_die) == SIG_IGN) std::signal(sig, SIG_IGN);  // keep nohup's
      return true;
    }();
    (void)installed;
    if (path.size() >= sizeof(TempSlot::path)) return;
    for (TempSlot& s : g_temp_slots) {
      int free = 0;
      if (!s.state.compare_exchange_strong(free, 1)) continue;
      std::memcpy(s.path, path.c_str(), path.size() + 1);
      s.state.store(2);
      slot_ = &s;
      return;
    }
  }
  ~TempFileGuard() {
    if (slot_) slot_->state.store(0);
  }
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;

 private:
  TempSlot* slot_ = nullptr;
};

}  // namespace

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  namespace fs = std::filesystem;
  if (is_stream_output(path)) {
    std::cout.flush();  // the command's own output first, then this one after it
    std::ofstream file;
    if (path != "-") {
      file.open(path, std::ios::binary | std::ios::app);  // appended: a redirected file keeps what is in it
      if (!file) throw InputError(path, 0, 0, "", std::string("cannot write output file: ") + std::strerror(errno));
    }
    std::ostream& out = path == "-" ? std::cout : file;
    write(out);
    out.flush();
    if (!out) throw InputError(path, 0, 0, "", "cannot write output file (disk full?)");
    return;
  }
  const fs::path target = output_target(path);
  std::error_code ec;
  const fs::file_status st = fs::status(target, ec);
  if (fs::is_directory(st)) throw InputError(path, 0, 0, "", "cannot write output file: it is a directory");
  if (fs::is_regular_file(st) && calibrate::was_read_as_input(path))
    throw InputError(path, 0, 0, "",
                     "cannot write output file: this command read it as an input (a scenario's "
                     "profile, a fit's base); writing it would overwrite it");
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    // A device, a named pipe or a socket: write into it; a rename would replace it with a plain file.
    std::ofstream out(target, std::ios::binary);
    if (!out) throw InputError(path, 0, 0, "", std::string("cannot write output file: ") + std::strerror(errno));
    write(out);
    out.flush();
    if (!out) throw InputError(path, 0, 0, "", "cannot write output file (disk full?)");
    return;
  }
  // A plain file (or none yet): write a temporary file beside the target and rename it over the target, so that a
  // failed write never leaves a half-written file.
  // The temporary name is short, so that any name the target may have fits it too (a hidden file).
  static std::atomic<unsigned> serial{0};
  const fs::path tmp_path = (target.has_parent_path() ? target.parent_path() : fs::path(".")) /
                            (".clustersim-" + std::to_string(::getpid()) + "-" + std::to_string(serial++) + ".tmp");
  const std::string tmp = tmp_path.string();
  const TempFileGuard guard(tmp);  // until renamed or removed
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path, 0, 0, "", std::string("cannot write output file: ") + std::strerror(errno));
    try {
      write(out);
    } catch (...) {  // a failed formatter leaves no temporary file behind
      out.close();
      std::remove(tmp.c_str());
      throw;
    }
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw InputError(path, 0, 0, "", "cannot write output file (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw InputError(path, 0, 0, "", "cannot write output file: " + why);
  }
}

}  // namespace clustersim::cli
