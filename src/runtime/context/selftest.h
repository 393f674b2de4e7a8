// The built-in self-test: a vector add through the host path on random data,
// checked element by element, proving JIT, staging, launch and read-back work.
#ifndef VYRE_RUNTIME_CONTEXT_SELFTEST_H_
#define VYRE_RUNTIME_CONTEXT_SELFTEST_H_

#include <memory>

#include "absl/status/status.h"
#include "runtime/context/context.h"

namespace vyre {

absl::Status RunSelfTest(const std::shared_ptr<Context>& context, const char* what);

}  // namespace vyre

#endif  // VYRE_RUNTIME_CONTEXT_SELFTEST_H_
