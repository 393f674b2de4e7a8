// Publishing a new object: a handle in its type's table, owned by its
// context, so that closing the context frees it.
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

// Gives `object` a handle in `registry` that its context adopts; on a
// failed adoption the handle is removed again, so nothing half-made stays.
template <typename T>
absl::StatusOr<uint64_t> Register(HandleRegistry<T>& registry, HandleType type,
                                  std::shared_ptr<T> object, const char* what) {
  Context& ctx = object->context();
  T* raw = object.get();
  VYRE_ASSIGN_OR_RETURN(uint64_t bits, registry.Insert(std::move(object)));
  raw->set_handle(bits);
  absl::Status adopted = ctx.Adopt(type, bits, what);
  if (!adopted.ok()) {
    registry.Remove(bits, what).IgnoreError();
    return adopted;
  }
  return bits;
}

}  // namespace vyre

#endif  // VYRE_API_REGISTER_HANDLE_H_
