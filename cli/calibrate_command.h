// `clustersim calibrate <fit|import-nccl-tests|show> ...`: turning measurements into a hardware profile
// (calibrate/fit.h has the models and the fitting rules; calibrate/profiles/README.md the workflow).
//
//   calibrate import-nccl-tests LOG... -o RAW.textproto [--algo ring] [--proto simple] [--gpu NAME]
//       nccl-tests text logs or validation CSVs → RawMeasurements (calibrate/raw.proto), text format.
//       --algo/--proto say what NCCL_ALGO/NCCL_PROTO forced when measuring (default: "default", NCCL's choice).
//   calibrate fit RAW... -o PROFILE.textproto [--base NAME|PATH] [--bands 64K,1M,64M] [--name NAME]
//       raw measurements (text, JSON or binary) → a profile; prints the residuals of every band. Everything
//       not measured comes from --base (default: the built-in profile matching the raw GPU name).
//   calibrate show PROFILE
//       a profile (built-in name or file) as tables: provenance, GPU peaks, GEMM table, HBM curve,
//       alpha-beta bands, NCCL tuning constants.
// Output files are written atomically, after everything succeeded; the same inputs give the same bytes.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "calibrate/hardware_profile.h"

namespace clustersim::cli {

// The tables `calibrate show` prints.
std::string profile_tables(const calibrate::HardwareProfile& profile);

// Runs the command with its arguments (after "calibrate"). Returns the exit status; throws InputError for
// bad input.
int calibrate_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace clustersim::cli
