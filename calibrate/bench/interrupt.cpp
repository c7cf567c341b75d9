#include "calibrate/bench/interrupt.h"

#include <atomic>
#include <csignal>

namespace clustersim::bench {
namespace {

// Lock-free, so that the handler may touch it on whichever thread (NCCL's included) the signal lands.
std::atomic<int> g_interrupt_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

void on_interrupt(int signal_number) {
  int none = 0;
  if (g_interrupt_signal.compare_exchange_strong(none, signal_number)) return;
  // A second signal: the user insists. sigaction and raise are async-signal-safe; the raised signal
  // stays blocked until this handler returns, then takes its default action.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(signal_number, &default_action, nullptr);
  raise(signal_number);
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int interrupt_signal() {
  return g_interrupt_signal.load();
}

}  // namespace clustersim::bench
