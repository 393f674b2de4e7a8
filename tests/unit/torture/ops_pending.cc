// The torture operations on pending dispatches and replays (poll, wait,
// timing, release) and truncating reads of the last error.
#include <cstdint>
#include <cstring>
#include <vector>

#include "arguments.h"
#include "torture.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace torture {

void Torture::PendingPoll() {
  int index;
  HandleChoice choice;
  vyre_pending pending{PickPendingHandle(&index, &choice)};
  vyre_status s = Check(vyre_pending_poll(pending), "vyre_pending_poll");
  ExpectNotOk(s, choice, "vyre_pending_poll");
  if (choice == HandleChoice::kValid && s != VYRE_STATUS_OK && s != VYRE_STATUS_NOT_READY) {
    Fail("vyre_pending_poll of a live dispatch returned " + StatusName(s));
  }
}

void Torture::PendingWait() {
  int index;
  HandleChoice choice;
  vyre_pending pending{PickPendingHandle(&index, &choice)};
  static const std::vector<uint64_t> kTimeouts = {0, 1, 1000, 1000000, VYRE_WAIT_FOREVER};
  uint64_t timeout = rng_.Pick(kTimeouts);
  vyre_status s = Check(vyre_pending_wait(pending, timeout), "vyre_pending_wait");
  ExpectNotOk(s, choice, "vyre_pending_wait");
  if (choice != HandleChoice::kValid) return;
  PendingState& p = pop_.pendings[size_t(index)];
  if (p.waited) {
    ExpectStatus(s, VYRE_STATUS_INVALID_STATE, "vyre_pending_wait (second)");
    return;
  }
  if (s == VYRE_STATUS_TIMEOUT && timeout != VYRE_WAIT_FOREVER) return;  // still waitable
  ExpectStatus(s, VYRE_STATUS_OK, "vyre_pending_wait");
  p.waited = true;
  PendingDone(p.handle.bits);  // a waited replay no longer holds its graph's staging
  if (s == VYRE_STATUS_OK) CheckHostOutputs(p, true, "vyre_pending_wait");
}

void Torture::PendingTiming() {
  int index;
  HandleChoice choice;
  vyre_pending pending{PickPendingHandle(&index, &choice)};
  WithTail<vyre_timing> timing{VYRE_TIMING_INIT, {}};
  bool well_formed = true;
  RandomizeStructSize(&rng_, &timing, &well_formed);
  bool null_out = rng_.Chance(0.05);
  vyre_status s = Check(vyre_pending_timing(pending, null_out ? nullptr : &timing.value),
                        "vyre_pending_timing");
  ExpectNotOk(s, choice, "vyre_pending_timing");
  if (choice != HandleChoice::kValid) return;
  if (null_out) {
    if (s == VYRE_STATUS_OK) Fail("vyre_pending_timing accepted a NULL out");
    return;
  }
  const PendingState& p = pop_.pendings[size_t(index)];
  if (!p.waited) {
    if (s == VYRE_STATUS_OK) Fail("vyre_pending_timing before the wait returned OK");
    return;
  }
  if (well_formed) ExpectStatus(s, VYRE_STATUS_OK, "vyre_pending_timing");
}

void Torture::PendingRelease() {
  int index;
  HandleChoice choice;
  vyre_pending pending{PickPendingHandle(&index, &choice)};
  vyre_status s = Check(vyre_pending_release(pending), "vyre_pending_release");
  ExpectNotOk(s, choice, "vyre_pending_release");
  if (choice != HandleChoice::kValid) return;
  ExpectStatus(s, VYRE_STATUS_OK, "vyre_pending_release");
  PendingState& p = pop_.pendings[size_t(index)];
  if (!p.waited) CheckHostOutputs(p, false, "vyre_pending_release");
  ForgetPending(size_t(index));
}

void Torture::LastErrorProbe() {
  // Truncating reads of the last error must stay NUL-terminated.
  vyre_status before = vyre_last_error(nullptr, nullptr, nullptr, 0, nullptr);
  size_t capacity = size_t(rng_.Below(12));
  std::vector<char> text(capacity + 1, '#');
  size_t length = 0;
  vyre_status status = VYRE_STATUS_OK;
  int32_t cu = 0;
  vyre_status r = vyre_last_error(&status, &cu, capacity ? text.data() : nullptr, capacity, &length);
  if (r != before || status != before) Fail("vyre_last_error changed between reads");
  if (capacity > 0 && std::memchr(text.data(), '\0', capacity) == nullptr) {
    Fail("vyre_last_error left a truncated message unterminated");
  }
  if (text[capacity] != '#') Fail("vyre_last_error wrote past message_capacity");
}

}  // namespace torture
}  // namespace vyre_test
