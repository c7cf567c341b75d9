// `clustersim compare A B [C ...] [--json FILE] [--report FILE.html|FILE.md] [--price-per-gpu-hour USD]`
//
// Simulates each scenario (as `run` does) and prints them side by side, the first being the baseline:
// GPUs and layout, iteration time, its breakdown (compute / exposed communication / input stall / idle of the GPU with
// the most exposed communication), tokens/s (total and per GPU), MFU, peak memory per GPU with the capacity and the OOM
// verdict, optimizer steps, time to train, GPU-hours and — with a price — cost. Every other scenario has a column of
// its difference to the baseline,
//   delta = 100 % x (value - baseline) / baseline   ("n/a" when the baseline is 0 and the value not),
// and the best value of each row where lower or higher is better is marked "*" (no mark when all are
// equal). cost = GPU-hours x price per GPU-hour. Scenarios with several jobs are compared job by job
// (job i against the baseline's job i), which needs the same number of jobs in each.
// ANSI colours (better green, worse red, best bold) only when `colour` is set, i.e. stdout is a
// terminal and NO_COLOR is unset; files never have them. Output is deterministic.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace clustersim::cli {

// Runs the command with its arguments (after "compare"). Returns the exit status; throws InputError
// for bad input (before any output file is written).
int compare_command(const std::vector<std::string>& args, std::ostream& out, bool colour = false);

// Whether the terminal table of `compare` should be coloured: stdout is a terminal and NO_COLOR is unset.
bool colour_for_stdout();

}  // namespace clustersim::cli
