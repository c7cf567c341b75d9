// SIGINT and SIGTERM (Ctrl-C, `timeout`, a batch system's time limit) end clustersim-bench
// without losing what it measured. The handlers only set a flag; the sweeps (NCCL sizes and
// waits, GEMM shapes, memory sizes) call throw_if_interrupted(), and run() then has rank 0 write
// the samples measured so far and exits with status 1. A second signal ends the process at once
// (the default action), for a run stuck in a call that never returns.
//
// In a multi-process run only the ranks that receive the signal stop; the others wait in their
// collective until NCCL reports that the peer has gone (launchers such as srun and mpirun forward
// the signal to every rank, so this matters when one rank is signalled by hand).
#pragma once

#include <exception>

namespace clustersim::bench {

// Thrown by throw_if_interrupted(); caught in run().
class Interrupted : public std::exception {
 public:
  const char* what() const noexcept override { return "interrupted by a signal"; }
};

// Installs the SIGINT and SIGTERM handlers (SA_RESTART, so other system calls are not disturbed).
void install_interrupt_handlers();

// The signal that asked the program to stop; 0 while none has.
int interrupt_signal();

inline void throw_if_interrupted() {
  if (interrupt_signal() != 0) throw Interrupted();
}

}  // namespace clustersim::bench
