// Finished pending work kept for reuse, so that steady asynchronous work
// allocates nothing. The pool lives with the object whose work it recycles
// (a program keeps its dispatches, a graph its replays): no one needs to
// know every kind of pending work, and nothing is cast back.
#ifndef VYRE_RUNTIME_DISPATCH_RECYCLE_POOL_H_
#define VYRE_RUNTIME_DISPATCH_RECYCLE_POOL_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace vyre {

template <typename T>
class RecyclePool {
 public:
  static constexpr size_t kCapacity = 64;

  // A kept object, detached and holding nothing, or null.
  std::shared_ptr<T> Take() {
    std::lock_guard lock(mu_);
    if (items_.empty()) return nullptr;
    std::shared_ptr<T> item = std::move(items_.back());
    items_.pop_back();
    return item;
  }

  // Keeps `item` (detached by its owner) if nobody else can still reach it
  // and the pool has room.
  void Put(std::shared_ptr<T> item) {
    if (item.use_count() != 1) return;
    std::lock_guard lock(mu_);
    if (items_.size() < kCapacity) items_.push_back(std::move(item));
  }

 private:
  std::mutex mu_;  // std::mutex: on the async dispatch path
  std::vector<std::shared_ptr<T>> items_;
};

}  // namespace vyre

#endif  // VYRE_RUNTIME_DISPATCH_RECYCLE_POOL_H_
