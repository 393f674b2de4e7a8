// Fuzzes resident buffer copies on the fake driver: vyre_buffer_upload,
// _download, _upload_ranges and _download_ranges with fuzzed buffers (of a
// few sizes, freed, forged), offsets (any 64-bit value), sizes and range
// counts, from and into pageable memory, vyre_host_alloc memory and memory
// registered with vyre_host_register (ranges that straddle its ends too);
// plus allocations of fuzzed sizes.
//
// Host memory rules kept: a host pointer is valid for the bytes it comes
// with, except when those bytes exceed the buffer, which the library must
// refuse before it touches host memory ("every range is checked before
// anything is copied").
//
// Checks: the outcome rules of fuzz_support.h; no misuse seen by the fake
// driver; no buffer outlives its handle; and the data: a shadow copy of every
// buffer follows each accepted upload (a refused call changes nothing), and
// every accepted download must match it byte for byte. Each input starts
// from zeroed buffers, so a finding replays on its own.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz_support.h"
#include "vyre_cuda.h"

namespace {

constexpr size_t kPageableBytes = 320 << 10;
constexpr size_t kPinnedBytes = 320 << 10;
// A block whose middle third is registered with vyre_host_register.
constexpr size_t kRegisteredBlock = 192 << 10;
constexpr size_t kRegisteredStart = 64 << 10;
constexpr size_t kRegisteredBytes = 64 << 10;
constexpr size_t kMaxRanges = 64;

struct Shadow {
  std::vector<unsigned char> bytes;
  std::vector<unsigned char> known;  // 0 where two accepted ranges raced
};

struct State {
  vyre_context context{0};
  std::vector<vyre_buffer> buffers;
  std::vector<Shadow> shadows;
  // Buffers an upload was tried on (whatever it returned) since their last
  // reset: each input starts from zeroed buffers, so a finding replays alone.
  std::vector<bool> dirty;
  vyre_buffer freed{0};
  unsigned char* pageable = nullptr;
  unsigned char* pinned = nullptr;
  unsigned char* registered_block = nullptr;
};
State* g = nullptr;

void Setup() {
  g = new State;
  g->context = vyre_fuzz::MakeContext();
  // 300000 bytes: uploads and downloads over 256 KiB of pageable memory go
  // through the ring of pinned chunks.
  for (uint64_t bytes :
       {uint64_t{1}, uint64_t{7}, uint64_t{64}, uint64_t{4096}, uint64_t{300000}}) {
    vyre_buffer b{0};
    VYRE_FUZZ_EXPECT(vyre_buffer_alloc(g->context, bytes, &b), VYRE_STATUS_OK);
    Shadow s;
    s.bytes.assign(bytes, 0);
    s.known.assign(bytes, 1);
    std::vector<unsigned char> zeros(bytes, 0);
    VYRE_FUZZ_EXPECT(vyre_buffer_upload(b, 0, zeros.data(), bytes), VYRE_STATUS_OK);
    g->buffers.push_back(b);
    g->shadows.push_back(std::move(s));
    g->dirty.push_back(false);
  }
  VYRE_FUZZ_EXPECT(vyre_buffer_alloc(g->context, 16, &g->freed), VYRE_STATUS_OK);
  VYRE_FUZZ_EXPECT(vyre_buffer_free(g->freed), VYRE_STATUS_OK);
  g->pageable = static_cast<unsigned char*>(std::calloc(kPageableBytes, 1));
  void* pinned = nullptr;
  VYRE_FUZZ_EXPECT(vyre_host_alloc(g->context, kPinnedBytes, &pinned), VYRE_STATUS_OK);
  g->pinned = static_cast<unsigned char*>(pinned);
  g->registered_block = static_cast<unsigned char*>(std::aligned_alloc(4096, kRegisteredBlock));
  std::memset(g->registered_block, 0, kRegisteredBlock);
  VYRE_FUZZ_EXPECT(
      vyre_host_register(g->context, g->registered_block + kRegisteredStart, kRegisteredBytes),
      VYRE_STATUS_OK);
}

// A host pointer and the bytes valid from it.
unsigned char* PickHost(FuzzedDataProvider& in, size_t* room) {
  unsigned char* base;
  size_t size;
  size_t offset;
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      base = g->pinned;
      size = kPinnedBytes;
      break;
    case 1:
      base = g->registered_block;
      size = kRegisteredBlock;
      break;
    default:
      base = g->pageable;
      size = kPageableBytes;
      break;
  }
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0:
      offset = 0;
      break;
    case 1:
      offset = in.ConsumeIntegralInRange<size_t>(0, 64);
      break;
    case 2:
      // Around the registered range's ends (for the other memories, anywhere).
      offset = (in.ConsumeBool() ? kRegisteredStart : kRegisteredStart + kRegisteredBytes) -
               in.ConsumeIntegralInRange<size_t>(0, 64);
      break;
    default:
      offset = in.ConsumeIntegralInRange<size_t>(0, size - 1);
      break;
  }
  *room = size - offset;
  return base + offset;
}

struct Target {
  vyre_buffer buffer{0};
  Shadow* shadow = nullptr;  // NULL: not a live buffer of ours
  uint64_t size = 0;
  size_t index = 0;
};

// Every buffer an upload was tried on must hold what its shadow says, read
// back whole: a call that changed bytes it should not (a refused one that
// wrote part of its ranges, an accepted one that wrote outside them) shows
// here even when no later download of the input looked at them.
void ExpectDirtyBuffersMatch() {
  for (size_t i = 0; i < g->buffers.size(); ++i) {
    if (!g->dirty[i]) continue;
    const Shadow& s = g->shadows[i];
    std::vector<unsigned char> whole(s.bytes.size());
    VYRE_FUZZ_EXPECT(vyre_buffer_download(g->buffers[i], 0, whole.data(), whole.size()),
                     VYRE_STATUS_OK);
    for (size_t b = 0; b < whole.size(); ++b) {
      if (s.known[b] && whole[b] != s.bytes[b]) {
        vyre_fuzz::Fail(
            "after the input, byte %zu of buffer %zu (%zu bytes) reads 0x%02x, but "
            "0x%02x was uploaded there",
            b, i, whole.size(), whole[b], s.bytes[b]);
      }
    }
  }
}

// Zeroes every buffer an earlier input uploaded to, and its shadow.
void ResetDirtyBuffers() {
  for (size_t i = 0; i < g->buffers.size(); ++i) {
    if (!g->dirty[i]) continue;
    Shadow& s = g->shadows[i];
    std::fill(s.bytes.begin(), s.bytes.end(), 0);
    std::fill(s.known.begin(), s.known.end(), 1);
    VYRE_FUZZ_EXPECT(vyre_buffer_upload(g->buffers[i], 0, s.bytes.data(), s.bytes.size()),
                     VYRE_STATUS_OK);
    g->dirty[i] = false;
  }
}

Target PickBuffer(FuzzedDataProvider& in) {
  Target t;
  const int which = in.ConsumeIntegralInRange<int>(0, 15);
  if (which < 13) {
    const size_t i = static_cast<size_t>(which) % g->buffers.size();
    t.buffer = g->buffers[i];
    t.shadow = &g->shadows[i];
    t.size = g->shadows[i].bytes.size();
    t.index = i;
  } else if (which == 13) {
    t.buffer = g->freed;
  } else if (which == 14) {
    t.buffer.bits = 0;
  } else {
    t.buffer.bits = in.ConsumeIntegral<uint64_t>();
  }
  return t;
}

// One range: its offset, its host pointer and bytes (valid host memory, or
// more bytes than the buffer holds).
struct Range {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  unsigned char* host = nullptr;
};

Range PickRange(FuzzedDataProvider& in, const Target& t) {
  Range r;
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0:
      r.offset = 0;
      break;
    case 1:
      r.offset = vyre_fuzz::InterestingU64(in);
      break;
    default:
      r.offset = in.ConsumeIntegralInRange<uint64_t>(0, t.size + 8);
      break;
  }
  size_t room = 0;
  r.host = PickHost(in, &room);
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      r.bytes = 0;
      break;
    case 1: {
      // More than the buffer holds: refused, host memory untouched.
      const uint64_t wild = vyre_fuzz::InterestingU64(in);
      r.bytes = wild > t.size ? wild : t.size + 1 + in.ConsumeIntegralInRange<uint64_t>(0, 8);
      if (r.bytes <= room) r.bytes = std::min<uint64_t>(r.bytes, room);
      break;
    }
    case 2:
      r.bytes = std::min<uint64_t>(room, t.size > r.offset ? t.size - r.offset : 0);
      break;
    case 3:
      r.bytes = std::min<uint64_t>(room, in.ConsumeIntegralInRange<uint64_t>(1, 64));
      break;
    default:
      r.bytes = in.ConsumeIntegralInRange<uint64_t>(0, std::min<uint64_t>(room, t.size + 16));
      break;
  }
  // Bytes the host memory does not hold must be refused: only then may they
  // exceed `room`. (A buffer that is not ours may be any size: keep in room.)
  if (r.bytes > room && (t.shadow == nullptr || r.bytes <= t.size)) r.bytes = room;
  if (in.ConsumeIntegralInRange<int>(0, 31) == 0) r.host = nullptr;
  return r;
}

bool Inside(uint64_t offset, uint64_t bytes, uint64_t size) {
  return offset <= size && bytes <= size - offset;
}

void Fill(unsigned char* p, uint64_t bytes, uint8_t seed) {
  for (uint64_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(seed + i * 131 + (i >> 8));
}

void ExpectMatches(const Target& t, const Range& r, const char* call) {
  for (uint64_t i = 0; i < r.bytes; ++i) {
    if (!t.shadow->known[r.offset + i]) continue;
    if (r.host[i] != t.shadow->bytes[r.offset + i]) {
      vyre_fuzz::Fail(
          "%s: byte %llu of the buffer (range offset %llu, %llu bytes) reads 0x%02x, "
          "but 0x%02x was uploaded there",
          call, static_cast<unsigned long long>(r.offset + i),
          static_cast<unsigned long long>(r.offset), static_cast<unsigned long long>(r.bytes),
          r.host[i], t.shadow->bytes[r.offset + i]);
    }
  }
}

bool Overlap(uint64_t a, uint64_t an, uint64_t b, uint64_t bn) {
  return an > 0 && bn > 0 && a < b + bn && b < a + an;
}

void Op(FuzzedDataProvider& in) {
  const int op = in.ConsumeIntegralInRange<int>(0, 9);
  Target t = PickBuffer(in);
  if (op <= 1) {
    Range r = PickRange(in, t);
    const bool valid = t.shadow && r.host && Inside(r.offset, r.bytes, t.size);
    if (valid) Fill(r.host, r.bytes, in.ConsumeIntegral<uint8_t>());
    if (t.shadow) g->dirty[t.index] = true;
    const vyre_status st = VYRE_FUZZ_CALL(vyre_buffer_upload(t.buffer, r.offset, r.host, r.bytes));
    if (st == VYRE_STATUS_OK && t.shadow != nullptr) {
      if (r.bytes > 0 && !valid) vyre_fuzz::Fail("vyre_buffer_upload accepted a bad range");
      if (r.bytes > 0) std::memcpy(&t.shadow->bytes[r.offset], r.host, r.bytes);
      if (r.bytes > 0) std::memset(&t.shadow->known[r.offset], 1, r.bytes);
    }
  } else if (op <= 3) {
    Range r = PickRange(in, t);
    const vyre_status st =
        VYRE_FUZZ_CALL(vyre_buffer_download(t.buffer, r.offset, r.host, r.bytes));
    if (st == VYRE_STATUS_OK && t.shadow != nullptr && r.bytes > 0) {
      if (!r.host || !Inside(r.offset, r.bytes, t.size)) {
        vyre_fuzz::Fail("vyre_buffer_download accepted a bad range");
      }
      ExpectMatches(t, r, "vyre_buffer_download");
    }
  } else if (op <= 7) {
    const bool upload = op <= 5;
    size_t count = in.ConsumeIntegralInRange<size_t>(0, 8);
    bool null_array = false;
    switch (in.ConsumeIntegralInRange<int>(0, 15)) {
      case 0:
        count = in.ConsumeIntegralInRange<size_t>(0, kMaxRanges);
        break;
      case 1:
        count = static_cast<size_t>(vyre_fuzz::InterestingU64(in));
        null_array = true;
        break;
      default:
        break;
    }
    std::vector<Range> ranges(null_array ? 0 : count);
    bool all_valid = t.shadow != nullptr;
    for (Range& r : ranges) {
      r = PickRange(in, t);
      all_valid = all_valid && (r.bytes == 0 || (r.host && Inside(r.offset, r.bytes, t.size)));
    }
    const uint8_t seed = in.ConsumeIntegral<uint8_t>();
    vyre_status st;
    if (upload && t.shadow) g->dirty[t.index] = true;
    if (upload) {
      std::vector<vyre_upload_range> raw(ranges.size());
      for (size_t i = 0; i < ranges.size(); ++i) {
        if (all_valid) Fill(ranges[i].host, ranges[i].bytes, static_cast<uint8_t>(seed + i));
        raw[i] = {ranges[i].offset, ranges[i].bytes, ranges[i].host};
      }
      // Host ranges may overlap, so what each range uploads is read after
      // every fill.
      std::vector<std::vector<unsigned char>> sent(ranges.size());
      if (all_valid) {
        for (size_t i = 0; i < ranges.size(); ++i) {
          sent[i].assign(ranges[i].host, ranges[i].host + ranges[i].bytes);
        }
      }
      st = VYRE_FUZZ_CALL(
          vyre_buffer_upload_ranges(t.buffer, null_array ? nullptr : raw.data(), count));
      if (st == VYRE_STATUS_OK && t.shadow != nullptr) {
        if (!all_valid) vyre_fuzz::Fail("vyre_buffer_upload_ranges accepted a bad range");
        for (size_t i = 0; i < ranges.size(); ++i) {
          if (ranges[i].bytes == 0) continue;
          std::memcpy(&t.shadow->bytes[ranges[i].offset], sent[i].data(), ranges[i].bytes);
          std::memset(&t.shadow->known[ranges[i].offset], 1, ranges[i].bytes);
        }
        // Device ranges written twice: which write lands is not promised.
        for (size_t i = 0; i < ranges.size(); ++i) {
          for (size_t j = i + 1; j < ranges.size(); ++j) {
            const Range& a = ranges[i];
            const Range& b = ranges[j];
            if (!Overlap(a.offset, a.bytes, b.offset, b.bytes)) continue;
            const uint64_t lo = std::max(a.offset, b.offset);
            const uint64_t hi = std::min(a.offset + a.bytes, b.offset + b.bytes);
            std::memset(&t.shadow->known[lo], 0, hi - lo);
          }
        }
      }
    } else {
      std::vector<vyre_download_range> raw(ranges.size());
      for (size_t i = 0; i < ranges.size(); ++i) {
        raw[i] = {ranges[i].offset, ranges[i].bytes, ranges[i].host};
      }
      st = VYRE_FUZZ_CALL(
          vyre_buffer_download_ranges(t.buffer, null_array ? nullptr : raw.data(), count));
      if (st == VYRE_STATUS_OK && t.shadow != nullptr) {
        if (!all_valid) vyre_fuzz::Fail("vyre_buffer_download_ranges accepted a bad range");
        // Ranges whose host bytes another range also wrote are skipped.
        for (size_t i = 0; i < ranges.size(); ++i) {
          bool shared = false;
          for (size_t j = 0; j < ranges.size() && !shared; ++j) {
            shared = j != i && ranges[i].host && ranges[j].host &&
                     Overlap(reinterpret_cast<uintptr_t>(ranges[i].host), ranges[i].bytes,
                             reinterpret_cast<uintptr_t>(ranges[j].host), ranges[j].bytes);
          }
          if (!shared && ranges[i].bytes > 0) {
            ExpectMatches(t, ranges[i], "vyre_buffer_download_ranges");
          }
        }
      }
    }
  } else if (op == 8) {
    vyre_buffer_info info = VYRE_BUFFER_INFO_INIT;
    if (VYRE_FUZZ_CALL(vyre_buffer_info_get(t.buffer, &info)) == VYRE_STATUS_OK &&
        t.shadow != nullptr && info.bytes != t.size) {
      vyre_fuzz::Fail("vyre_buffer_info_get: %llu bytes, allocated %llu",
                      static_cast<unsigned long long>(info.bytes),
                      static_cast<unsigned long long>(t.size));
    }
  } else {
    // An allocation of a fuzzed size (the fake device has 256 MiB), then free.
    const uint64_t bytes = vyre_fuzz::InterestingU64(in);
    vyre_buffer b{0x77};
    const vyre_status st = VYRE_FUZZ_CALL(vyre_buffer_alloc(g->context, bytes, &b));
    if (st == VYRE_STATUS_OK) {
      VYRE_FUZZ_EXPECT(vyre_buffer_free(b), VYRE_STATUS_OK);
      VYRE_FUZZ_EXPECT(vyre_buffer_free(b), VYRE_STATUS_STALE_HANDLE);
    } else if (b.bits != 0) {
      vyre_fuzz::Fail("vyre_buffer_alloc failed (%s) but left *out = 0x%llx", vyre_status_name(st),
                      static_cast<unsigned long long>(b.bits));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vyre_fuzz::SetUpEnvironment();
  Setup();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  ResetDirtyBuffers();
  const vyre_fuzz::LiveObjects live = vyre_fuzz::Live(g->context);
  const uint64_t misuse = vyre_fuzz::FakeMisuseCount();
  const int ops = in.ConsumeIntegralInRange<int>(1, 8);
  for (int i = 0; i < ops && in.remaining_bytes() > 0; ++i) Op(in);
  ExpectDirtyBuffersMatch();
  vyre_fuzz::ExpectNoMisuse(misuse, "the buffer operations");
  vyre_fuzz::ExpectLive(g->context, live, "the buffer operations");
  return 0;
}
