// The `clustersim` command. Input errors print one line, `error: FILE:LINE:COL: field.path: what`,
// and exit with status 2; a deadlocked simulation names its stuck tasks, also with status 2.
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/calibrate_command.h"
#include "cli/collective_command.h"
#include "cli/compare_command.h"
#include "cli/plan_command.h"
#include "cli/run_command.h"
#include "cli/sweep_command.h"
#include "cli/topo_command.h"
#include "cli/validate_command.h"
#include "sim/executor.h"
#include "sim/input_error.h"
#include "topology/topology.h"

namespace {

constexpr const char* kUsage =
    "usage: clustersim <command> [options]\n"
    "\n"
    "commands:\n"
    "  run [SCENARIO]   simulate one training iteration; print time, throughput, MFU, memory, time to train\n"
    "  topo [SCENARIO]  show the cluster: GPUs, switches, links, NVLink domains, bisection, diameter\n"
    "  collective [SCENARIO] --op OP\n"
    "                   nccl-tests, simulated: one collective over a sweep of sizes, NCCL's algorithm and\n"
    "                   protocol; --compare FILE predicts a measured nccl-tests run and reports the error\n"
    "  validate         predict the published training measurements (validation/training/) and report the\n"
    "                   error per row and the mean absolute percentage error per source group\n"
    "  sweep SCENARIO   every valid parallel layout of the model on the GPUs, scored analytically, OOM ones\n"
    "                   rejected with the reason, the best re-simulated and ranked; Pareto front of time vs memory\n"
    "  plan SCENARIO --tokens T (--deadline-days D | --gpus N)\n"
    "                   GPUs needed for a token budget by a deadline (or days on N GPUs): cost, energy,\n"
    "                   goodput with failures and Young/Daly checkpointing\n"
    "  compare A B [C ...]\n"
    "                   simulate scenarios and print them side by side with the differences to A (time,\n"
    "                   breakdown, tokens/s, MFU, memory, time to train, GPU-hours, cost)\n"
    "\n"
    "run and compare take --report FILE.html (one self-contained file with charts) or FILE.md (Markdown).\n"
    "clustersim <command> --help shows the options of a command.\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
      std::cout << kUsage;
      return args.empty() ? 2 : 0;
    }
    if (args[0] == "--version") {
      std::cout << "clustersim 0.1.0\n";
      return 0;
    }
    const std::string command = args[0];
    args.erase(args.begin());
    if (command == "run") return clustersim::cli::run_command(args, std::cout);
    if (command == "topo") return clustersim::cli::topo_command(args, std::cout);
    if (command == "collective") return clustersim::cli::collective_command(args, std::cout);
    if (command == "calibrate") return clustersim::cli::calibrate_command(args, std::cout);
    if (command == "validate") return clustersim::cli::validate_command(args, std::cout);
    if (command == "sweep") return clustersim::cli::sweep_command(args, std::cout);
    if (command == "plan") return clustersim::cli::plan_command(args, std::cout);
    if (command == "compare") return clustersim::cli::compare_command(args, std::cout, clustersim::cli::colour_for_stdout());
    std::cerr << "error: command line: unknown command '" << command << "'\n" << kUsage;
    return 2;
  } catch (const clustersim::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const clustersim::topology::NoRouteError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const clustersim::sim::DeadlockError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    // Not a bug report: the scenario asked for more than this machine's memory holds (a large job at FLOW fidelity).
    std::cerr << "error: out of memory: the simulation of this scenario does not fit in this machine's memory "
                 "(fewer layers, micro-batches or GPUs, or ANALYTICAL fidelity, need less)\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 1;
  }
}
