#include "fuzz_support.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "fake_cuda_client.h"

#ifndef VYRE_FUZZ_FAKE_DRIVER
#error "VYRE_FUZZ_FAKE_DRIVER (the fake driver's path) must be defined by the build"
#endif

namespace vyre_fuzz {

void SetUpEnvironment() {
  setenv("VYRE_CUDA_DRIVER_LIBRARY", VYRE_FUZZ_FAKE_DRIVER, /*overwrite=*/0);
  setenv("VYRE_CUDA_NVRTC_LIBRARY", "/nonexistent/vyre-fuzz/libnvrtc.so", /*overwrite=*/0);
  // The fake fills every allocation, so its device memory is resident host
  // memory: 256 MiB keeps a target well inside libFuzzer's -rss_limit_mb, and
  // larger requests exercise the out-of-memory paths.
  setenv("FAKE_CUDA_MEMORY_BYTES", "268435456", /*overwrite=*/0);
}

void Fail(const char* format, ...) {
  std::fprintf(stderr, "\n==vyre-fuzz== CHECK FAILED: ");
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  std::abort();
}

vyre_context MakeContext() {
  vyre_context_desc desc = VYRE_CONTEXT_DESC_INIT;
  desc.staging_chunk_bytes = 64 << 10;
  desc.staging_chunk_count = 2;
  desc.staging_threads = 2;
  vyre_context context{0};
  vyre_status status = vyre_context_create(&desc, &context);
  if (status != VYRE_STATUS_OK) {
    char message[2048] = "";
    vyre_last_error(nullptr, nullptr, message, sizeof message, nullptr);
    Fail("vyre_context_create on the fake driver (%s) failed: %s: %s",
         std::getenv("VYRE_CUDA_DRIVER_LIBRARY"), vyre_status_name(status), message);
  }
  return context;
}

namespace {

std::string LastMessage() {
  size_t length = 0;
  vyre_last_error(nullptr, nullptr, nullptr, 0, &length);
  std::string message(length + 1, '\0');
  vyre_last_error(nullptr, nullptr, message.data(), message.size(), nullptr);
  message.resize(length);
  return message;
}

}  // namespace

namespace {

// VYRE_FUZZ_STATS=1: how often each call returned each status, printed at
// exit (to see how deep a corpus gets).
std::map<std::string, std::map<int32_t, uint64_t>>* Stats() {
  static auto* stats = [] {
    const char* on = std::getenv("VYRE_FUZZ_STATS");
    if (on == nullptr || *on == '\0' || *on == '0')
      return static_cast<std::map<std::string, std::map<int32_t, uint64_t>>*>(nullptr);
    auto* s = new std::map<std::string, std::map<int32_t, uint64_t>>;
    std::atexit([] {
      for (const auto& [call, counts] : *Stats()) {
        std::fprintf(stderr, "vyre-fuzz stats: %s\n", call.c_str());
        for (const auto& [status, n] : counts) {
          std::fprintf(stderr, "    %-36s %llu\n",
                       vyre_status_name(static_cast<vyre_status>(status)),
                       static_cast<unsigned long long>(n));
        }
      }
    });
    return s;
  }();
  return stats;
}

}  // namespace

vyre_status Check(vyre_status status, const char* call) {
  const int32_t raw = static_cast<int32_t>(status);
  if (auto* stats = Stats()) {
    std::string name(call);
    name = name.substr(0, name.find('('));
    ++(*stats)[name][raw];
  }
  if (raw < VYRE_STATUS_OK || raw > VYRE_STATUS_DEVICE_FAULT) {
    Fail("%s returned %d, which is no vyre_status", call, raw);
  }
  vyre_status reported = VYRE_STATUS_OK;
  vyre_last_error(&reported, nullptr, nullptr, 0, nullptr);
  const std::string message = LastMessage();
  if (reported != status) {
    Fail("%s returned %s but vyre_last_error() reports %s (\"%s\")", call, vyre_status_name(status),
         vyre_status_name(reported), message.c_str());
  }
  if (status == VYRE_STATUS_OK) {
    if (!message.empty()) Fail("%s returned OK but left the message \"%s\"", call, message.c_str());
    return status;
  }
  if (status == VYRE_STATUS_INTERNAL) {
    Fail("%s returned VYRE_STATUS_INTERNAL (a bug by the header's definition): \"%s\"", call,
         message.c_str());
  }
  // The fake device never faults unless a test arms a fault, which no target
  // does: an error the driver returned means the library handed it
  // something it should have refused itself (with a status that names the
  // caller's mistake).
  if (status == VYRE_STATUS_DRIVER_ERROR || status == VYRE_STATUS_DEVICE_FAULT) {
    Fail("%s returned %s on the fake driver with no fault armed: \"%s\"", call,
         vyre_status_name(status), message.c_str());
  }
  const std::string first_line = message.substr(0, message.find('\n'));
  if (first_line.size() > 1023) {
    Fail("%s: %s message's first line has %zu bytes (at most 1023): \"%s\"", call,
         vyre_status_name(status), first_line.size(), message.c_str());
  }
  const size_t fix = first_line.find(". Fix: ");
  const size_t colon = first_line.find(": ");
  if (fix == std::string::npos || colon == 0 || colon >= fix || fix + 7 >= first_line.size() - 1 ||
      first_line.back() != '.') {
    Fail("%s: %s message lacks the \"<what failed>: <why>. Fix: <what to do>.\" layout: \"%s\"",
         call, vyre_status_name(status), message.c_str());
  }
  // base/message.h's kMissingFixMarker: the library added a Fix because the
  // error was made without one. That Fix ends the line ("... (<marker>).");
  // the marker elsewhere is caller text (a fuzzed name) quoted in the message.
  static const std::string kAddedFixEnd = "(the failure came without a Fix of its own).";
  if (first_line.size() >= kAddedFixEnd.size() &&
      first_line.compare(first_line.size() - kAddedFixEnd.size(), kAddedFixEnd.size(),
                         kAddedFixEnd) == 0) {
    Fail("%s: %s was made without a Fix: \"%s\"", call, vyre_status_name(status), message.c_str());
  }
  return status;
}

void Expect(vyre_status status, vyre_status expected, const char* call) {
  Check(status, call);
  if (status != expected) {
    Fail("%s returned %s, expected %s: \"%s\"", call, vyre_status_name(status),
         vyre_status_name(expected), LastMessage().c_str());
  }
}

uint64_t FakeMisuseCount() { return vyre_test::FakeCuda::Stats().misuse_errors; }

void ExpectNoMisuse(uint64_t before, const char* after_what) {
  const uint64_t now = FakeMisuseCount();
  if (now != before) {
    Fail(
        "the fake driver counted %llu misuse error(s) after %s (printed above): the engine "
        "made a call the real driver would reject",
        static_cast<unsigned long long>(now - before), after_what);
  }
}

LiveObjects Live(vyre_context context) {
  vyre_telemetry t = VYRE_TELEMETRY_INIT;
  if (vyre_context_telemetry(context, &t) != VYRE_STATUS_OK) {
    Fail("vyre_context_telemetry failed: %s", LastMessage().c_str());
  }
  LiveObjects live;
  live.buffers = t.live_buffers;
  live.programs = t.live_programs;
  live.pendings = t.live_pendings;
  live.graphs = t.live_graphs;
  live.sequences = t.live_sequences;
  return live;
}

void ExpectLive(vyre_context context, const LiveObjects& expected, const char* after_what) {
  const LiveObjects now = Live(context);
  if (!(now == expected)) {
    Fail(
        "after %s the context holds %llu buffers, %llu programs, %llu pendings, %llu graphs, "
        "%llu sequences; expected %llu, %llu, %llu, %llu, %llu (an object outlived its handle)",
        after_what, static_cast<unsigned long long>(now.buffers),
        static_cast<unsigned long long>(now.programs),
        static_cast<unsigned long long>(now.pendings), static_cast<unsigned long long>(now.graphs),
        static_cast<unsigned long long>(now.sequences),
        static_cast<unsigned long long>(expected.buffers),
        static_cast<unsigned long long>(expected.programs),
        static_cast<unsigned long long>(expected.pendings),
        static_cast<unsigned long long>(expected.graphs),
        static_cast<unsigned long long>(expected.sequences));
  }
}

uint64_t InterestingU64(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
      return in.ConsumeIntegralInRange<uint64_t>(0, 16);
    case 1:
      return in.ConsumeIntegralInRange<uint64_t>(0, 4096);
    case 2: {
      const int bit = in.ConsumeIntegralInRange<int>(0, 63);
      const int delta = in.ConsumeIntegralInRange<int>(-1, 1);
      return (uint64_t{1} << bit) + static_cast<uint64_t>(static_cast<int64_t>(delta));
    }
    case 3:
      return UINT64_MAX - in.ConsumeIntegralInRange<uint64_t>(0, 16);
    case 4:
      return uint64_t{UINT32_MAX} + static_cast<uint64_t>(in.ConsumeIntegralInRange<int>(-2, 2));
    case 5:
      return in.ConsumeIntegralInRange<uint64_t>(0, uint64_t{1} << 20);
    default:
      return in.ConsumeIntegral<uint64_t>();
  }
}

uint32_t InterestingU32(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      return in.ConsumeIntegralInRange<uint32_t>(0, 16);
    case 1:
      return in.ConsumeIntegralInRange<uint32_t>(0, 4096);
    case 2: {
      const int bit = in.ConsumeIntegralInRange<int>(0, 31);
      const int delta = in.ConsumeIntegralInRange<int>(-1, 1);
      return static_cast<uint32_t>((uint64_t{1} << bit) +
                                   static_cast<uint64_t>(static_cast<int64_t>(delta)));
    }
    case 3:
      return UINT32_MAX - in.ConsumeIntegralInRange<uint32_t>(0, 16);
    default:
      return in.ConsumeIntegral<uint32_t>();
  }
}

std::string FuzzName(FuzzedDataProvider& in, size_t max_long) {
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      return std::string();
    case 1: {
      // Long: a fuzzed seed repeated, every byte value possible.
      std::string seed = in.ConsumeRandomLengthString(16);
      if (seed.empty()) seed = "x";
      const size_t length = in.ConsumeIntegralInRange<size_t>(1, max_long);
      std::string out;
      out.reserve(length);
      while (out.size() < length) out += seed;
      out.resize(length);
      return std::string(out.c_str());  // stops at the first NUL, as C does
    }
    case 2: {
      // Bytes that are not UTF-8: lone continuation bytes, cut sequences,
      // overlong forms, 0xFF.
      static const char* const kBad[] = {"\x80",     "\xC3",     "\xE2\x9C",    "\xF0\x9F\x98",
                                         "\xC0\xAF", "\xFF\xFE", "\xED\xA0\x80"};
      std::string out = in.ConsumeRandomLengthString(8);
      const int pieces = in.ConsumeIntegralInRange<int>(1, 8);
      for (int i = 0; i < pieces; ++i) {
        out += kBad[in.ConsumeIntegralInRange<size_t>(0, sizeof(kBad) / sizeof(kBad[0]) - 1)];
        out += in.ConsumeRandomLengthString(4);
      }
      return std::string(out.c_str());
    }
    default:
      return std::string(in.ConsumeRandomLengthString(64).c_str());
  }
}

uint32_t PickStructSize(FuzzedDataProvider& in, uint32_t ours, uint32_t max, int last_choice) {
  switch (in.ConsumeIntegralInRange<int>(0, last_choice)) {
    case 0:
      return 0;
    case 1:
      return ours - 8;
    case 2:
      return ours + 8;
    case 3:
      return in.ConsumeIntegralInRange<uint32_t>(0, max);
    default:
      return ours;
  }
}

}  // namespace vyre_fuzz
