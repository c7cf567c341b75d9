// The `clustersim` command. Input errors print one line, `error: FILE:LINE:COL: field.path: what`,
// and exit with status 2; a deadlocked simulation names its stuck tasks, also with status 2.
#include <array>
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

using Args = std::vector<std::string>;

// Every command, in the order the usage lists them: main() dispatches from this table and the usage is printed
// from it, so a command cannot exist without being listed.
struct Command {
  const char* name;
  const char* synopsis;  // the name and its arguments, as the usage shows them
  const char* summary;   // what it does; lines of at most 100 columns, '\n' between them
  int (*run)(const Args&);
};

const std::array<Command, 8> kCommands = {{
    {"run", "run [SCENARIO]", "simulate one training iteration; print time, throughput, MFU, memory, time to train",
     [](const Args& a) { return clustersim::cli::run_command(a, std::cout); }},
    {"topo", "topo [SCENARIO]", "show the cluster: GPUs, switches, links, NVLink domains, bisection, diameter",
     [](const Args& a) { return clustersim::cli::topo_command(a, std::cout); }},
    {"collective", "collective [SCENARIO] --op OP",
     "nccl-tests, simulated: one collective over a sweep of sizes, NCCL's algorithm and\n"
     "protocol; --compare FILE predicts a measured nccl-tests run and reports the error",
     [](const Args& a) { return clustersim::cli::collective_command(a, std::cout); }},
    {"calibrate", "calibrate import-nccl-tests | fit | show",
     "measured runs (nccl-tests logs, clustersim-bench output) -> a fitted hardware profile\n"
     "with its provenance and residuals; show prints a profile as tables",
     [](const Args& a) { return clustersim::cli::calibrate_command(a, std::cout); }},
    {"validate", "validate",
     "predict the published training measurements (validation/training/) and report the\n"
     "error per row and the mean absolute percentage error per source group",
     [](const Args& a) { return clustersim::cli::validate_command(a, std::cout); }},
    {"sweep", "sweep SCENARIO",
     "every valid parallel layout of the model on the GPUs, scored analytically, OOM ones\n"
     "rejected with the reason, the best re-simulated and ranked; Pareto front of time vs memory",
     [](const Args& a) { return clustersim::cli::sweep_command(a, std::cout); }},
    {"plan", "plan SCENARIO --tokens T (--deadline-days D | --gpus N)",
     "GPUs needed for a token budget by a deadline (or days on N GPUs): cost, energy,\n"
     "goodput with failures and Young's checkpoint interval",
     [](const Args& a) { return clustersim::cli::plan_command(a, std::cout); }},
    {"compare", "compare A B [C ...]",
     "simulate scenarios and print them side by side with the differences to A (time,\n"
     "breakdown, tokens/s, MFU, memory, time to train, GPU-hours, cost)",
     [](const Args& a) {
       return clustersim::cli::compare_command(a, std::cout, clustersim::cli::colour_for_stdout());
     }},
}};

// The usage: a synopsis of up to 16 columns shares its line with the summary's first line; a longer one stands
// alone. Summary lines are indented to column 19.
std::string usage() {
  std::string out = "usage: clustersim <command> [options]\n\ncommands:\n";
  const std::string indent(19, ' ');
  for (const Command& c : kCommands) {
    const std::string synopsis = c.synopsis;
    std::string summary = c.summary;
    for (std::size_t at = summary.find('\n'); at != std::string::npos; at = summary.find('\n', at + 1 + indent.size()))
      summary.insert(at + 1, indent);
    if (synopsis.size() <= 16)
      out += "  " + synopsis + std::string(17 - synopsis.size(), ' ') + summary + "\n";
    else
      out += "  " + synopsis + "\n" + indent + summary + "\n";
  }
  out +=
      "\n"
      "run and compare take --report FILE.html (one self-contained file with charts) or FILE.md (Markdown).\n"
      "clustersim <command> --help shows the options of a command.\n";
  return out;
}

// "one of run, topo, ...; clustersim --help describes them", for the one-line errors.
std::string command_names() {
  std::string out = "one of";
  for (std::size_t i = 0; i < kCommands.size(); ++i) out += (i == 0 ? " " : ", ") + std::string(kCommands[i].name);
  return out + "; clustersim --help describes them";
}

// The command's exit status, its errors printed as one line on stderr.
int dispatch(std::vector<std::string> args) {
  try {
    if (args.empty()) {  // the usage for the reader, one error line for scripts
      std::cout << usage();
      std::cerr << "error: command line: no command given (" << command_names() << ")\n";
      return 2;
    }
    if (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
      std::cout << usage();
      return 0;
    }
    if (args[0] == "--version") {
      std::cout << "clustersim 0.1.0\n";
      return 0;
    }
    const std::string command = args[0];
    args.erase(args.begin());
    for (const Command& c : kCommands)
      if (command == c.name) return c.run(args);
    std::cerr << "error: command line: unknown command '" << command << "' (" << command_names() << ")\n";
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
  } catch (const clustersim::sim::TimeRangeError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    // Not a bug report: the scenario asked for more than this machine's memory holds (a large job at FLOW fidelity).
    std::cerr << "error: out of memory: the simulation of this scenario does not fit in this machine's memory "
                 "(fewer layers, micro-batches or GPUs need less, and so does ANALYTICAL fidelity where FLOW is set)\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int status = dispatch(std::vector<std::string>(argv + 1, argv + argc));
  // What went to standard output must have arrived: a full disk or a closed descriptor (`> /dev/full`, `>&-`)
  // fails the run as a failed output file does, not exit 0 with the report lost. (A reader that closes the pipe
  // early, `| head`, ends the process by SIGPIPE before this, as it does for any Unix filter.)
  std::cout.flush();
  if (!std::cout && status != 2) {
    std::cerr << "error: standard output: cannot write (disk full or closed?)\n";
    return 2;
  }
  return status;
}
