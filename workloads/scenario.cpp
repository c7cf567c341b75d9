#include "workloads/scenario.h"

namespace clustersim::workloads {

const char* to_string(Precision p) {
  switch (p) {
    case Precision::kBF16: return "BF16";
    case Precision::kFP16: return "FP16";
    case Precision::kFP32: return "FP32";
    case Precision::kTF32: return "TF32";
    case Precision::kFP8: return "FP8";
  }
  return "?";
}

const char* to_string(FlashKernel k) {
  switch (k) {
    case FlashKernel::kGeneric: return "generic";
    case FlashKernel::kFa2: return "FA2";
    case FlashKernel::kFa3: return "FA3";
    case FlashKernel::kTriton: return "TRITON";
  }
  return "?";
}

const char* to_string(Framework f) {
  switch (f) {
    case Framework::kAuto: return "auto";
    case Framework::kPytorchDdp: return "PyTorch DDP";
    case Framework::kMegatron: return "Megatron-LM";
    case Framework::kFsdp: return "PyTorch FSDP";
    case Framework::kDeepSpeed: return "DeepSpeed ZeRO";
    case Framework::kDataParallel: return "torch.nn.DataParallel";
    case Framework::kHorovod: return "Horovod";
  }
  return "?";
}

const char* to_string(Fidelity f) { return f == Fidelity::kFlow ? "FLOW" : "ANALYTICAL"; }

bool sixteen_bit(Precision p) { return element_bytes(p) == 2.0; }

double element_bytes(Precision p) {
  switch (p) {
    case Precision::kBF16:
    case Precision::kFP16:
    case Precision::kFP8: return 2.0;
    case Precision::kFP32:
    case Precision::kTF32: return 4.0;
  }
  return 4.0;
}

}  // namespace clustersim::workloads
