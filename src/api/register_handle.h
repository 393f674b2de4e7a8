// Publishing a new object: a handle in its type's table, owned by its
// context, so that closing the context frees it. Every create call of the
// API publishes through Register.
#ifndef VYRE_API_REGISTER_HANDLE_H_
#define VYRE_API_REGISTER_HANDLE_H_

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "base/handle_registry.h"
#include "base/status.h"
#include "runtime/context/context.h"

namespace vyre {

// Gives `object` a handle in `registry` that `owner` adopts (null: an object
// of no context, such as a context itself or a CPU e-graph image); on a
// failed adoption the handle is removed again, so nothing half-made stays.
template <typename T, typename U>
absl::StatusOr<uint64_t> Register(HandleRegistry<T>& registry, std::shared_ptr<U> object,
                                  Context* owner, const char* what) {
  U* raw = object.get();
  VYRE_ASSIGN_OR_RETURN(uint64_t bits, registry.Insert(std::move(object)));
  raw->set_handle(bits);
  if (owner == nullptr) return bits;
  absl::Status adopted = owner->Adopt(registry, bits, what);
  if (!adopted.ok()) {
    registry.Remove(bits, what).IgnoreError();
    return adopted;
  }
  return bits;
}

}  // namespace vyre

#endif  // VYRE_API_REGISTER_HANDLE_H_
