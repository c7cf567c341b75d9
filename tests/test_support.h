// Helpers shared by the test files.
#pragma once

#include <functional>
#include <string>

#include "sim/input_error.h"

namespace clustersim::testing {

// what() of the InputError the call throws, or a marker that makes a CHECK fail readably.
inline std::string input_error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no InputError thrown>";
}

}  // namespace clustersim::testing
