// The torture operations on contexts: create, destroy, and the queries
// (telemetry against the population, device info, trim).
#include <cstddef>
#include <cstdint>
#include <string>

#include "arguments.h"
#include "torture.h"

namespace vyre_test {
namespace torture {
namespace {

// vyre_context_desc before the staging fields.
constexpr size_t kContextDescV1Size = offsetof(vyre_context_desc, staging_chunk_bytes);

}  // namespace

void Torture::ContextCreate() {
  WithTail<vyre_context_desc> desc{VYRE_CONTEXT_DESC_INIT, {}};
  bool well_formed = true;
  RandomizeStructSize(&rng_, &desc, &well_formed, kContextDescV1Size);
  if (rng_.Chance(0.1)) {
    desc.value.device_ordinal = uint32_t(rng_.Range(1, 5));
    well_formed = false;
  }
  if (rng_.Chance(0.2)) desc.value.transient_pool_limit_bytes = rng_.Below(1 << 20);
  if (rng_.Chance(0.2)) desc.value.pinned_pool_limit_bytes = rng_.Below(1 << 20);
  bool null_desc = rng_.Chance(0.05);
  bool null_out = rng_.Chance(0.05);
  if (null_desc || null_out) well_formed = false;
  if (well_formed && pop_.contexts.size() >= kMaxContexts) return;  // keep 1-3 alive
  vyre_context out{0};
  vyre_status s = Check(vyre_context_create(null_desc ? nullptr : &desc.value,
                                            null_out ? nullptr : &out),
                        "vyre_context_create");
  if (well_formed) ExpectStatus(s, VYRE_STATUS_OK, "vyre_context_create");
  if (s == VYRE_STATUS_OK) {
    if (!well_formed) Fail("vyre_context_create accepted a malformed call");
    if (null_out) return;
    pop_.contexts.push_back(out.bits);
  }
}

void Torture::ContextDestroy() {
  HandleChoice choice;
  uint64_t bits = PickContextHandle(&choice);
  if (choice == HandleChoice::kValid && pop_.contexts.size() <= 1) return;  // keep one
  vyre_status s = Check(vyre_context_destroy(vyre_context{bits}), "vyre_context_destroy");
  ExpectNotOk(s, choice, "vyre_context_destroy");
  if (choice == HandleChoice::kValid) {
    ExpectStatus(s, VYRE_STATUS_OK, "vyre_context_destroy");
    ForgetContext(bits);
  }
}

void Torture::ContextQuery() {
  HandleChoice choice;
  vyre_context context{PickContextHandle(&choice)};
  vyre_status s = VYRE_STATUS_OK;
  bool well_formed = choice == HandleChoice::kValid;
  const char* call = "";
  switch (rng_.Below(4)) {
    case 0: {
      WithTail<vyre_telemetry> t{VYRE_TELEMETRY_INIT, {}};
      RandomizeStructSize(&rng_, &t, &well_formed);
      call = "vyre_context_telemetry";
      s = Check(vyre_context_telemetry(context, &t.value), call);
      if (s == VYRE_STATUS_OK && well_formed && t.value.struct_size == sizeof(vyre_telemetry)) {
        CheckTelemetry(context, t.value);
      }
      break;
    }
    case 1: {
      WithTail<vyre_device_info> info{VYRE_DEVICE_INFO_INIT, {}};
      RandomizeStructSize(&rng_, &info, &well_formed);
      call = "vyre_context_device_info";
      s = Check(vyre_context_device_info(context, &info.value), call);
      break;
    }
    case 2:
      call = "vyre_context_trim";
      s = Check(vyre_context_trim(context), call);
      break;
    default: {
      call = "vyre_context_telemetry(NULL)";
      s = Check(vyre_context_telemetry(context, nullptr), call);
      if (s == VYRE_STATUS_OK) Fail("vyre_context_telemetry accepted a NULL out");
      return;
    }
  }
  ExpectNotOk(s, choice, call);
  if (well_formed) ExpectStatus(s, VYRE_STATUS_OK, call);
}

// A freed buffer a live pending dispatch, graph or sequence still uses stays
// counted until that is done with it; so does a destroyed graph a pending
// replay holds, and a destroyed sequence its graph holds.
void Torture::CheckTelemetry(vyre_context context, const vyre_telemetry& t) {
  uint64_t buffers = 0, pendings = 0, graphs = 0, sequences = 0, sequence_graphs = 0;
  for (const auto& b : pop_.buffers) buffers += b.context == context.bits;
  for (const auto& p : pop_.pendings) pendings += p.context == context.bits;
  for (const auto& g : pop_.graphs) {
    graphs += g.context == context.bits;
    sequence_graphs += g.context == context.bits && g.sequence != nullptr;
  }
  for (const auto& q : pop_.sequences) sequences += q.context == context.bits;
  const bool holders = pendings + graphs + sequences > 0;
  if (holders ? t.live_buffers < buffers : t.live_buffers != buffers) {
    Fail("telemetry live_buffers " + std::to_string(t.live_buffers) + ", expected " +
         std::to_string(buffers));
  }
  if (pendings == 0 ? t.live_graphs != graphs : t.live_graphs < graphs) {
    Fail("telemetry live_graphs " + std::to_string(t.live_graphs) + ", expected " +
         std::to_string(graphs));
  }
  if (pendings + sequence_graphs == 0 ? t.live_sequences != sequences
                                      : t.live_sequences < sequences) {
    Fail("telemetry live_sequences " + std::to_string(t.live_sequences) + ", expected " +
         std::to_string(sequences));
  }
}

}  // namespace torture
}  // namespace vyre_test
