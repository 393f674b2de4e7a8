#include "api_handle_calls.h"

#include <array>
#include <random>

#include "vyre_test_util.h"

namespace vyre_test {
namespace {

// Storage the calls read and write; contents never matter.
std::array<uint32_t, 4> g_input_a = {1, 2, 3, 4};
std::array<uint32_t, 4> g_input_b = {5, 6, 7, 8};
std::array<uint32_t, 4> g_output = {0, 0, 0, 0};
std::array<uint32_t, 4> g_scratch = {0, 0, 0, 0};

vyre_status CreateAddProgram(vyre_context context) {
  ProgramSpec spec = AddSpec();
  vyre_program_desc desc = spec.Desc();
  vyre_program program{0};
  return vyre_program_create(context, &desc, &program);
}

DispatchSpec HostAddDispatch() {
  DispatchSpec spec;
  spec.bindings = {HostIn(g_input_a.data(), 16), HostIn(g_input_b.data(), 16),
                   HostOut(g_output.data(), 16)};
  return spec;
}

}  // namespace

const char* HandleKindName(HandleKind kind) {
  switch (kind) {
    case HandleKind::kContext: return "context";
    case HandleKind::kBuffer: return "buffer";
    case HandleKind::kProgram: return "program";
    case HandleKind::kPending: return "pending";
  }
  return "?";
}

std::vector<HandleCall> AllHandleCalls() {
  using K = HandleKind;
  return {
      {"vyre_context_destroy", K::kContext,
       [](uint64_t bits) { return vyre_context_destroy(vyre_context{bits}); }},
      {"vyre_context_device_info", K::kContext,
       [](uint64_t bits) {
         vyre_device_info info = VYRE_DEVICE_INFO_INIT;
         return vyre_context_device_info(vyre_context{bits}, &info);
       }},
      {"vyre_context_telemetry", K::kContext,
       [](uint64_t bits) {
         vyre_telemetry telemetry = VYRE_TELEMETRY_INIT;
         return vyre_context_telemetry(vyre_context{bits}, &telemetry);
       }},
      {"vyre_context_trim", K::kContext,
       [](uint64_t bits) { return vyre_context_trim(vyre_context{bits}); }},
      {"vyre_context_selftest", K::kContext,
       [](uint64_t bits) { return vyre_context_selftest(vyre_context{bits}); }},
      {"vyre_buffer_alloc", K::kContext,
       [](uint64_t bits) {
         vyre_buffer buffer{0};
         return vyre_buffer_alloc(vyre_context{bits}, 16, &buffer);
       }},
      {"vyre_program_create", K::kContext,
       [](uint64_t bits) { return CreateAddProgram(vyre_context{bits}); }},
      {"vyre_buffer_free", K::kBuffer,
       [](uint64_t bits) { return vyre_buffer_free(vyre_buffer{bits}); }},
      {"vyre_buffer_upload", K::kBuffer,
       [](uint64_t bits) { return vyre_buffer_upload(vyre_buffer{bits}, 0, g_input_a.data(), 4); }},
      {"vyre_buffer_download", K::kBuffer,
       [](uint64_t bits) {
         return vyre_buffer_download(vyre_buffer{bits}, 0, g_scratch.data(), 4);
       }},
      {"vyre_buffer_upload_ranges", K::kBuffer,
       [](uint64_t bits) {
         vyre_upload_range range{0, 4, g_input_a.data()};
         return vyre_buffer_upload_ranges(vyre_buffer{bits}, &range, 1);
       }},
      {"vyre_buffer_download_ranges", K::kBuffer,
       [](uint64_t bits) {
         vyre_download_range range{0, 4, g_scratch.data()};
         return vyre_buffer_download_ranges(vyre_buffer{bits}, &range, 1);
       }},
      {"vyre_buffer_info_get", K::kBuffer,
       [](uint64_t bits) {
         vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
         return vyre_buffer_info_get(vyre_buffer{bits}, &info);
       }},
      {"vyre_program_destroy", K::kProgram,
       [](uint64_t bits) { return vyre_program_destroy(vyre_program{bits}); }},
      {"vyre_dispatch", K::kProgram,
       [](uint64_t bits) {
         DispatchSpec spec = HostAddDispatch();
         vyre_dispatch_desc desc = spec.Desc();
         vyre_timing timing = VYRE_TIMING_INIT;
         return vyre_dispatch(vyre_program{bits}, &desc, &timing);
       }},
      {"vyre_dispatch_async", K::kProgram,
       [](uint64_t bits) {
         DispatchSpec spec = HostAddDispatch();
         vyre_dispatch_desc desc = spec.Desc();
         vyre_pending pending{0};
         return vyre_dispatch_async(vyre_program{bits}, &desc, &pending);
       }},
      {"vyre_pending_poll", K::kPending,
       [](uint64_t bits) { return vyre_pending_poll(vyre_pending{bits}); }},
      {"vyre_pending_wait", K::kPending,
       [](uint64_t bits) { return vyre_pending_wait(vyre_pending{bits}, 0); }},
      {"vyre_pending_timing", K::kPending,
       [](uint64_t bits) {
         vyre_timing timing = VYRE_TIMING_INIT;
         return vyre_pending_timing(vyre_pending{bits}, &timing);
       }},
      {"vyre_pending_release", K::kPending,
       [](uint64_t bits) { return vyre_pending_release(vyre_pending{bits}); }},
  };
}

HandleCall ResidentBindingCall(vyre_program add_program) {
  return {"vyre_dispatch (RESIDENT binding)", HandleKind::kBuffer, [add_program](uint64_t bits) {
            DispatchSpec spec = HostAddDispatch();
            spec.bindings[0] = Resident(vyre_buffer{bits}, 0, 16);
            vyre_dispatch_desc desc = spec.Desc();
            return vyre_dispatch(add_program, &desc, nullptr);
          }};
}

std::vector<uint64_t> ForgedHandleBits() {
  std::mt19937_64 rng(0x5eed);
  std::vector<uint64_t> bits = {~uint64_t{0}, 0x0123456789ABCDEFull, uint64_t{1} << 63, 1};
  for (int i = 0; i < 12; ++i) bits.push_back(rng() | 1);
  return bits;
}

}  // namespace vyre_test
