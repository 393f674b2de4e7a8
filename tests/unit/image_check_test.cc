// Kernel images proven whole before the driver sees them
// (src/runtime/image_check.h). White-box, linked to vyre_cuda_static, run on
// the fake driver:
//   - every prefix of the real sm_90 test cubin and fatbin through
//     vyre_program_create is INVALID_ARGUMENT naming the bytes needed and the
//     bytes given, and the driver never sees it; only the whole image loads;
//   - forged headers: tables past the end, offsets that overflow 64 bits,
//     fatbin entries past the end, broken references;
//   - random bytes behind a valid magic, and random damage to the real images
//     (seeded: VYRE_IMAGE_SEED=<n>, default 20250110, printed; the number of
//     cases with VYRE_IMAGE_CASES=<n>, default 3000);
//   - PTX and CUDA source with a NUL before code_size;
//   - the fake driver's own image parser on forged images.
// Every image is handed over in a heap block of exactly its size, so under
// ASan a read past it fails the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "api_fake_fixture.h"
#include "base/status.h"
#include "driver/driver_api.h"
#include "runtime/program/image_check.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

using Bytes = std::vector<unsigned char>;
constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();

Bytes RealCubin() {
  return Bytes(vyre_test_kernels_cubin, vyre_test_kernels_cubin + vyre_test_kernels_cubin_size);
}
Bytes RealFatbin() {
  return Bytes(vyre_test_kernels_fatbin,
               vyre_test_kernels_fatbin + vyre_test_kernels_fatbin_size);
}

template <typename T>
T Get(const Bytes& b, uint64_t at) {
  T value;
  std::memcpy(&value, b.data() + at, sizeof(T));
  return value;
}
template <typename T>
void Put(Bytes* b, uint64_t at, T value) {
  std::memcpy(b->data() + at, &value, sizeof(T));
}

// ELF64 field offsets.
constexpr uint64_t kPhoff = 32, kShoff = 40, kEhsize = 52, kPhentsize = 54, kPhnum = 56,
                   kShentsize = 58, kShnum = 60, kShstrndx = 62;
uint64_t SectionHeader(const Bytes& b, uint64_t base, uint64_t i) {
  return base + Get<uint64_t>(b, base + kShoff) + i * Get<uint16_t>(b, base + kShentsize);
}
uint64_t ProgramHeader(const Bytes& b, uint64_t base, uint64_t i) {
  return base + Get<uint64_t>(b, base + kPhoff) + i * Get<uint16_t>(b, base + kPhentsize);
}
// The first section of `type` in the cubin at `base`.
uint64_t FindSection(const Bytes& b, uint64_t base, uint32_t type) {
  for (uint64_t i = 0; i < Get<uint16_t>(b, base + kShnum); ++i) {
    if (Get<uint32_t>(b, SectionHeader(b, base, i) + 4) == type) return i;
  }
  ADD_FAILURE() << "the test cubin has no section of type " << type;
  return 0;
}

// Where the structure of the (trusted) cubin at `base` begins and ends.
void AddElfBoundaries(const Bytes& b, uint64_t base, std::set<uint64_t>* out) {
  for (uint64_t at : {4, 5, 6, 16, 20, 52, 64}) out->insert(base + at);
  const uint64_t phnum = Get<uint16_t>(b, base + kPhnum);
  const uint64_t shnum = Get<uint16_t>(b, base + kShnum);
  for (uint64_t i = 0; i <= phnum; ++i) out->insert(ProgramHeader(b, base, i));
  for (uint64_t i = 0; i <= shnum; ++i) out->insert(SectionHeader(b, base, i));
  for (uint64_t i = 0; i < phnum; ++i) {
    const uint64_t header = ProgramHeader(b, base, i);
    out->insert(base + Get<uint64_t>(b, header + 8));
    out->insert(base + Get<uint64_t>(b, header + 8) + Get<uint64_t>(b, header + 32));
  }
  for (uint64_t i = 0; i < shnum; ++i) {
    const uint64_t header = SectionHeader(b, base, i);
    if (Get<uint32_t>(b, header + 4) == 8 /* SHT_NOBITS */) continue;
    out->insert(base + Get<uint64_t>(b, header + 24));
    out->insert(base + Get<uint64_t>(b, header + 24) + Get<uint64_t>(b, header + 32));
  }
}

struct FatbinEntry {
  uint64_t at, header, payload, payload_size;
  uint16_t kind;
};
std::vector<FatbinEntry> FatbinEntries(const Bytes& b) {
  std::vector<FatbinEntry> entries;
  const uint64_t end = Get<uint16_t>(b, 6) + Get<uint64_t>(b, 8);
  for (uint64_t at = Get<uint16_t>(b, 6); at < end;) {
    FatbinEntry e{at, Get<uint32_t>(b, at + 4), 0, Get<uint64_t>(b, at + 8), Get<uint16_t>(b, at)};
    e.payload = at + e.header;
    entries.push_back(e);
    at = e.payload + e.payload_size;
  }
  return entries;
}
// The fatbin entry holding the (uncompressed) cubin.
FatbinEntry CubinEntry(const Bytes& b) {
  for (const FatbinEntry& e : FatbinEntries(b)) {
    if (e.kind == 2 && std::memcmp(b.data() + e.payload, "\x7F" "ELF", 4) == 0) return e;
  }
  ADD_FAILURE() << "the test fatbin holds no uncompressed cubin";
  return FatbinEntry{};
}

void AddFatbinBoundaries(const Bytes& b, std::set<uint64_t>* out) {
  for (uint64_t at : {4, 6, 8, 16}) out->insert(at);
  for (const FatbinEntry& e : FatbinEntries(b)) {
    for (uint64_t at : {e.at, e.at + 4, e.at + 8, e.at + 16, e.payload, e.payload + e.payload_size}) {
      out->insert(at);
    }
    if (e.kind == 2 && std::memcmp(b.data() + e.payload, "\x7F" "ELF", 4) == 0) {
      AddElfBoundaries(b, e.payload, out);
    }
  }
}

// Every prefix length to try: each byte up to 4 KiB, then every 97th, and
// every structure boundary with its neighbours.
std::set<uint64_t> PrefixLengths(const Bytes& image, bool fatbin) {
  std::set<uint64_t> boundaries;
  if (fatbin) {
    AddFatbinBoundaries(image, &boundaries);
  } else {
    AddElfBoundaries(image, 0, &boundaries);
  }
  std::set<uint64_t> lengths;
  for (uint64_t n = 0; n <= image.size() && n <= 4096; ++n) lengths.insert(n);
  for (uint64_t n = 4096; n <= image.size(); n += 97) lengths.insert(n);
  for (uint64_t at : boundaries) {
    for (uint64_t n = at < 2 ? 0 : at - 2; n <= at + 2; ++n) {
      if (n <= image.size()) lengths.insert(n);
    }
  }
  lengths.insert(image.size() - 1);
  lengths.insert(image.size());
  return lengths;
}

// vyre_program_create of vyre_test_add_u32 from a heap copy of exactly
// `size` bytes of `data`.
vyre_status CreateBinary(vyre_context context, const unsigned char* data, size_t size,
                         vyre_program* out) {
  std::unique_ptr<unsigned char[]> copy(new unsigned char[size == 0 ? 1 : size]);
  if (size > 0) std::memcpy(copy.get(), data, size);
  ProgramSpec spec = AddSpec();
  vyre_program_desc desc = spec.Desc();
  desc.code_kind = VYRE_CODE_BINARY;
  desc.code = copy.get();
  desc.code_size = size;
  return vyre_program_create(context, &desc, out);
}

// The status is INVALID_ARGUMENT with a Fix, and the message says how many
// bytes were given and, past 0, the byte some part of the image ends at,
// which lies beyond them.
::testing::AssertionResult RefusedWithByteCounts(vyre_status status, uint64_t given) {
  ::testing::AssertionResult error = ExpectError(status, VYRE_STATUS_INVALID_ARGUMENT);
  if (!error) return error;
  const std::string message = LastErrorMessage();
  const std::string size = "code_size is " + std::to_string(given);
  const size_t at = message.find(size);
  if (at == std::string::npos || std::isdigit(static_cast<unsigned char>(
                                     message[at + size.size()]))) {
    return ::testing::AssertionFailure() << "no \"" << size << "\" in \"" << message << "\"";
  }
  if (given == 0) return ::testing::AssertionSuccess();
  const size_t ends = message.find("ends at byte ");
  if (ends == std::string::npos) {
    return ::testing::AssertionFailure() << "no \"ends at byte N\" in \"" << message << "\"";
  }
  const uint64_t needed = std::strtoull(message.c_str() + ends + 13, nullptr, 10);
  if (needed <= given) {
    return ::testing::AssertionFailure()
           << "the bytes needed (" << needed << ") are not more than those given (" << given
           << "): \"" << message << "\"";
  }
  return ::testing::AssertionSuccess();
}

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::strtoull(text, nullptr, 10) : fallback;
}

// ---------------------------------------------------------------------------
// Through vyre_program_create on the fake driver
// ---------------------------------------------------------------------------

class ImageTest : public FakeDriverTest {
 protected:
  void ExpectOnlyTheWholeImageLoads(const Bytes& image, bool fatbin) {
    const std::set<uint64_t> lengths = PrefixLengths(image, fatbin);
    const uint64_t loads_before = FakeCuda::Stats().module_loads;
    size_t refused = 0;
    for (uint64_t n : lengths) {
      if (n == image.size()) continue;
      vyre_program program{0};
      const vyre_status status = CreateBinary(context_, image.data(), n, &program);
      ASSERT_TRUE(RefusedWithByteCounts(status, n)) << "a prefix of " << n << " of "
                                                    << image.size() << " bytes";
      ASSERT_EQ(program.bits, 0u);
      ++refused;
    }
    EXPECT_EQ(FakeCuda::Stats().module_loads, loads_before)
        << "a refused image reached cuModuleLoadDataEx";
    std::printf("%zu prefixes of the %zu-byte %s refused before the driver\n", refused,
                image.size(), fatbin ? "fatbin" : "cubin");
    vyre_program program{0};
    ASSERT_VYRE_OK(CreateBinary(context_, image.data(), image.size(), &program));
    EXPECT_VYRE_OK(vyre_program_destroy(program));
  }

  // Creates from `image`; every outcome but a crash is allowed, and an error
  // must have the message layout. Returns the status.
  vyre_status CreateAnything(const Bytes& image) {
    vyre_program program{0};
    const vyre_status status = CreateBinary(context_, image.data(), image.size(), &program);
    if (status == VYRE_STATUS_OK) {
      EXPECT_VYRE_OK(vyre_program_destroy(program));
    } else {
      EXPECT_TRUE(ExpectError(status, status));
      EXPECT_EQ(program.bits, 0u);
    }
    return status;
  }
};

TEST_F(ImageTest, EveryPrefixOfTheCubinIsRefusedAndOnlyTheWholeLoads) {
  ExpectOnlyTheWholeImageLoads(RealCubin(), /*fatbin=*/false);
}

TEST_F(ImageTest, EveryPrefixOfTheFatbinIsRefusedAndOnlyTheWholeLoads) {
  ExpectOnlyTheWholeImageLoads(RealFatbin(), /*fatbin=*/true);
}

TEST_F(ImageTest, BytesAfterAWholeImageAreIgnored) {
  for (Bytes image : {RealCubin(), RealFatbin()}) {
    image.resize(image.size() + 100, 0xA5);
    vyre_program program{0};
    ASSERT_VYRE_OK(CreateBinary(context_, image.data(), image.size(), &program));
    EXPECT_VYRE_OK(vyre_program_destroy(program));
  }
}

TEST_F(ImageTest, ForgedImagesAreInvalidArguments) {
  const Bytes cubin = RealCubin();
  std::vector<std::pair<std::string, Bytes>> forged;
  Bytes b = cubin;
  Put<uint64_t>(&b, kShoff, cubin.size() - 64);
  forged.emplace_back("section header table past the end", b);
  b = cubin;
  Put<uint64_t>(&b, kPhoff, kMax64 - 100);
  forged.emplace_back("program header table offset that overflows", b);
  b = cubin;
  Put<uint64_t>(&b, SectionHeader(b, 0, 3) + 24, kMax64 - 8);
  forged.emplace_back("section offset that overflows", b);
  Bytes fatbin = RealFatbin();
  b = fatbin;
  Put<uint64_t>(&b, 8, Get<uint64_t>(b, 8) + 8);
  forged.emplace_back("fatSize past the end", b);
  b = fatbin;
  Put<uint64_t>(&b, FatbinEntries(b).back().at + 8, FatbinEntries(b).back().payload_size + 8);
  forged.emplace_back("fatbin entry past the end", b);
  b = fatbin;
  Put<uint32_t>(&b, FatbinEntries(b).front().at + 4, 0);
  forged.emplace_back("fatbin entry with a header of 0 bytes", b);
  b = fatbin;
  Put<uint64_t>(&b, CubinEntry(b).payload + kShoff, CubinEntry(b).payload_size);
  forged.emplace_back("the fatbin's cubin with its section headers past its payload", b);
  std::string ptx = vyre_test_kernels_ptx;
  forged.emplace_back("PTX given as a binary", Bytes(ptx.begin(), ptx.end()));
  for (const auto& [what, image] : forged) {
    SCOPED_TRACE(what);
    const uint64_t loads_before = FakeCuda::Stats().module_loads;
    vyre_program program{0};
    EXPECT_VYRE_ERROR(CreateBinary(context_, image.data(), image.size(), &program),
                      VYRE_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(FakeCuda::Stats().module_loads, loads_before);
  }
}

// Random bytes behind a valid magic, and random damage to the real images.
TEST_F(ImageTest, RandomImagesNeverCrash) {
  const uint64_t seed = EnvOr("VYRE_IMAGE_SEED", 20250110);
  const uint64_t cases = EnvOr("VYRE_IMAGE_CASES", 3000);
  std::printf("image seed %llu (VYRE_IMAGE_SEED=<n> to rerun), %llu cases\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(cases));
  SCOPED_TRACE("VYRE_IMAGE_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto below = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  const uint64_t extremes[] = {0, 1, 7, 8, 63, 64, 0x7FFF, 0xFFFF, 0xFFFFFFFF,
                               uint64_t{1} << 63, kMax64 - 64, kMax64};
  const Bytes cubin = RealCubin(), fatbin = RealFatbin();
  const FatbinEntry entry = CubinEntry(fatbin);
  // The header areas worth damaging: ELF header, both tables, the fatbin's
  // header and entry headers.
  // Offsets come from the undamaged image.
  const std::vector<FatbinEntry> entries = FatbinEntries(fatbin);
  auto header_offset = [&](bool is_fatbin) -> uint64_t {
    const Bytes& image = is_fatbin ? fatbin : cubin;
    const uint64_t base = is_fatbin ? entry.payload : 0;
    switch (below(is_fatbin ? 5 : 3)) {
      case 0: return base + below(64);
      case 1: return SectionHeader(image, base, 0) +
                     below(Get<uint16_t>(image, base + kShnum) * 64);
      case 2: return ProgramHeader(image, base, 0) +
                     below(Get<uint16_t>(image, base + kPhnum) * 56);
      case 3: return below(16);
      default: {
        const FatbinEntry& e = entries[below(entries.size())];
        return e.at + below(e.header);
      }
    }
  };
  size_t ok = 0, invalid = 0, other = 0;
  for (uint64_t c = 0; c < cases; ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    Bytes image;
    const uint64_t kind = below(6);
    if (kind <= 1) {  // random bytes behind the ELF magic (half with a CUDA ELF64 ident)
      image.resize(4 + below(kind == 0 ? 128 : 4096));
      for (auto& byte : image) byte = static_cast<unsigned char>(rng());
      std::memcpy(image.data(), "\x7F" "ELF", 4);
      if (kind == 1 && image.size() >= 64) {
        image[4] = 2;
        image[5] = 1;
        Put<uint16_t>(&image, 18, 190);
        Put<uint16_t>(&image, kEhsize, 64);
        Put<uint16_t>(&image, kShentsize, 64);
        Put<uint16_t>(&image, kPhentsize, 56);
        Put<uint16_t>(&image, kShnum, below(8));
        Put<uint16_t>(&image, kPhnum, below(4));
        Put<uint64_t>(&image, kShoff, below(image.size()));
        Put<uint64_t>(&image, kPhoff, below(image.size()));
      }
    } else if (kind == 2) {  // random bytes behind the fatbin magic, often sized right
      image.resize(4 + below(2048));
      for (auto& byte : image) byte = static_cast<unsigned char>(rng());
      Put<uint32_t>(&image, 0, vyre::kFatbinMagic);
      if (image.size() >= 32 && below(2) == 0) {
        Put<uint16_t>(&image, 6, 16);
        Put<uint64_t>(&image, 8, image.size() - 16);
        Put<uint32_t>(&image, 16 + 4, 16 + below(64));
        Put<uint64_t>(&image, 16 + 8, below(image.size()));
      }
    } else {  // the real cubin or fatbin with damaged headers, maybe cut short
      const bool is_fatbin = kind >= 4;
      image = is_fatbin ? fatbin : cubin;
      for (uint64_t k = 1 + below(4); k > 0; --k) {
        const uint64_t at = header_offset(is_fatbin);
        if (at >= image.size()) continue;
        if (below(2) == 0) {
          image[at] = static_cast<unsigned char>(rng());
        } else if (at + 8 <= image.size()) {
          Put<uint64_t>(&image, at - at % 2, extremes[below(std::size(extremes))]);
        }
      }
      if (below(4) == 0) image.resize(below(image.size()));
    }
    const vyre_status status = CreateAnything(image);
    if (HasFailure()) return;
    (status == VYRE_STATUS_OK ? ok : status == VYRE_STATUS_INVALID_ARGUMENT ? invalid : other)++;
  }
  std::printf("random images: %zu loaded, %zu INVALID_ARGUMENT, %zu other errors\n", ok,
              invalid, other);
}

// ---------------------------------------------------------------------------
// PTX and CUDA source with a NUL before code_size
// ---------------------------------------------------------------------------

vyre_status CreateText(vyre_context context, vyre_code_kind kind, const std::string& code,
                       vyre_program* out) {
  ProgramSpec spec = AddSpec();
  vyre_program_desc desc = spec.Desc();
  desc.code_kind = kind;
  desc.code = code.data();
  desc.code_size = code.size();
  return vyre_program_create(context, &desc, out);
}

TEST_F(ImageTest, TextWithANulBeforeCodeSizeIsInvalid) {
  const std::string ptx = vyre_test_kernels_ptx;
  std::string cut = ptx;
  cut.insert(cut.size() / 2, 1, '\0');
  vyre_program program{0};
  EXPECT_VYRE_ERROR(CreateText(context_, VYRE_CODE_PTX, cut, &program),
                    VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(LastErrorMessage().find("NUL byte at offset " + std::to_string(ptx.size() / 2)),
            std::string::npos)
      << LastErrorMessage();
  // A whole PTX followed by a NUL and more bytes: the rest would be lost.
  EXPECT_VYRE_ERROR(CreateText(context_, VYRE_CODE_PTX, ptx + std::string("\0junk", 5), &program),
                    VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_VYRE_ERROR(CreateText(context_, VYRE_CODE_CUDA_SOURCE,
                               std::string("extern \"C\" __global__ void k() {}\0 more", 40),
                               &program),
                    VYRE_STATUS_INVALID_ARGUMENT);
  // Trailing NULs are a terminator counted in code_size: still fine.
  ASSERT_VYRE_OK(CreateText(context_, VYRE_CODE_PTX, ptx + std::string(3, '\0'), &program));
  EXPECT_VYRE_OK(vyre_program_destroy(program));
  ASSERT_VYRE_OK(CreateText(context_, VYRE_CODE_PTX, ptx, &program));
  EXPECT_VYRE_OK(vyre_program_destroy(program));
}

// ---------------------------------------------------------------------------
// The parser itself (no driver)
// ---------------------------------------------------------------------------

struct Checked {
  vyre_status code;
  std::string message;
};
Checked Check(const Bytes& image) {
  // An exact-size heap copy, as above.
  std::unique_ptr<unsigned char[]> copy(new unsigned char[image.empty() ? 1 : image.size()]);
  if (!image.empty()) std::memcpy(copy.get(), image.data(), image.size());
  absl::StatusOr<vyre::BinaryFormat> format =
      vyre::CheckBinaryImage("test", copy.get(), image.size());
  if (format.ok()) return {VYRE_STATUS_OK, ""};
  return {vyre::PublicCode(format.status()), std::string(format.status().message())};
}

::testing::AssertionResult RefusedSaying(const Bytes& image,
                                         const std::vector<std::string>& needles) {
  Checked c = Check(image);
  if (c.code != VYRE_STATUS_INVALID_ARGUMENT) {
    return ::testing::AssertionFailure() << "status " << int(c.code) << ": " << c.message;
  }
  ::testing::AssertionResult layout = MessageLayoutOk(c.message);
  if (!layout) return layout;
  for (const std::string& needle : needles) {
    if (c.message.find(needle) == std::string::npos) {
      return ::testing::AssertionFailure() << "no \"" << needle << "\" in \"" << c.message << "\"";
    }
  }
  return ::testing::AssertionSuccess() << c.message;
}

TEST(ImageCheckTest, TheRealImagesPass) {
  absl::StatusOr<vyre::BinaryFormat> cubin = vyre::CheckBinaryImage(
      "test", vyre_test_kernels_cubin, vyre_test_kernels_cubin_size);
  ASSERT_TRUE(cubin.ok()) << cubin.status();
  EXPECT_EQ(*cubin, vyre::BinaryFormat::kCubin);
  absl::StatusOr<vyre::BinaryFormat> fatbin = vyre::CheckBinaryImage(
      "test", vyre_test_kernels_fatbin, vyre_test_kernels_fatbin_size);
  ASSERT_TRUE(fatbin.ok()) << fatbin.status();
  EXPECT_EQ(*fatbin, vyre::BinaryFormat::kFatbin);
}

TEST(ImageCheckTest, TruncationNamesTheBytesNeededAndGiven) {
  const Bytes cubin = RealCubin();
  const uint64_t shoff = Get<uint64_t>(cubin, kShoff);
  const uint64_t shnum = Get<uint16_t>(cubin, kShnum);
  const uint64_t phend = Get<uint64_t>(cubin, kPhoff) + Get<uint16_t>(cubin, kPhnum) * 56;
  EXPECT_TRUE(RefusedSaying(Bytes(cubin.begin(), cubin.begin() + 24),
                            {"test: the cubin's ELF header ends at byte 64 but code_size is 24",
                             "Fix: pass the whole image"}));
  EXPECT_TRUE(RefusedSaying(Bytes(cubin.begin(), cubin.begin() + 2),
                            {"ELF header ends at byte 64 but code_size is 2"}));
  // Both tables are cut: the one reaching further is named.
  const uint64_t table_end = std::max(shoff + shnum * 64, phend);
  EXPECT_TRUE(RefusedSaying(Bytes(cubin.begin(), cubin.begin() + 1000),
                            {"ends at byte " + std::to_string(table_end), "code_size is 1000"}));
  const Bytes fatbin = RealFatbin();
  EXPECT_TRUE(RefusedSaying(Bytes(fatbin.begin(), fatbin.begin() + 10),
                            {"the fatbin's header ends at byte 16 but code_size is 10"}));
  EXPECT_TRUE(RefusedSaying(
      Bytes(fatbin.begin(), fatbin.begin() + 1000),
      {"the fatbin ends at byte " + std::to_string(fatbin.size()) + " (headerSize 16 + fatSize " +
           std::to_string(fatbin.size() - 16) + ") but code_size is 1000"}));
}

TEST(ImageCheckTest, TablesAndSectionsPastTheEnd) {
  const Bytes cubin = RealCubin();
  const std::string size = std::to_string(cubin.size());
  Bytes b = cubin;
  Put<uint64_t>(&b, kShoff, cubin.size() - 64);
  EXPECT_TRUE(RefusedSaying(b, {"section header table ends at byte", "code_size is " + size}));
  b = cubin;
  Put<uint16_t>(&b, kPhnum, 0xFFFF);
  EXPECT_TRUE(RefusedSaying(b, {"program header table ends at byte", "x 56 bytes"}));
  b = cubin;
  const uint64_t symtab = FindSection(b, 0, 2);
  Put<uint64_t>(&b, SectionHeader(b, 0, symtab) + 32, cubin.size());
  EXPECT_TRUE(RefusedSaying(b, {"section " + std::to_string(symtab) + " ('.symtab') ends at byte",
                                "sh_size " + size}));
  b = cubin;
  Put<uint64_t>(&b, ProgramHeader(b, 0, 2) + 32, cubin.size());
  EXPECT_TRUE(RefusedSaying(b, {"segment 2 (program header 2) ends at byte", "p_filesz " + size}));
  b = cubin;
  Put<uint16_t>(&b, kEhsize, cubin.size() + 1 > 0xFFFF ? 0xFFFF : cubin.size() + 1);
  EXPECT_TRUE(RefusedSaying(b, {"ELF header ends at byte", "(e_ehsize)"}));
}

TEST(ImageCheckTest, OffsetsThatOverflow) {
  const Bytes cubin = RealCubin();
  for (uint64_t field : {kShoff, kPhoff}) {
    Bytes b = cubin;
    Put<uint64_t>(&b, field, kMax64 - 100);
    EXPECT_TRUE(RefusedSaying(b, {"overflows 64 bits", "code_size is"}));
  }
  Bytes b = cubin;
  Put<uint64_t>(&b, SectionHeader(b, 0, 4) + 24, kMax64 - 8);
  EXPECT_TRUE(RefusedSaying(b, {"section 4", "overflows 64 bits"}));
  b = cubin;
  Put<uint64_t>(&b, ProgramHeader(b, 0, 1) + 8, uint64_t{1} << 63);
  Put<uint64_t>(&b, ProgramHeader(b, 0, 1) + 32, uint64_t{1} << 63);
  EXPECT_TRUE(RefusedSaying(b, {"segment 1", "overflows 64 bits"}));
  const Bytes fatbin = RealFatbin();
  b = fatbin;
  Put<uint64_t>(&b, 8, kMax64 - 4);
  EXPECT_TRUE(RefusedSaying(b, {"the fatbin", "overflows 64 bits"}));
  b = fatbin;
  Put<uint64_t>(&b, FatbinEntries(fatbin)[0].at + 8, kMax64 - 20);
  EXPECT_TRUE(RefusedSaying(b, {"entry 0", "overflows 64 bits"}));
}

TEST(ImageCheckTest, FatbinEntriesPastTheEnd) {
  const Bytes fatbin = RealFatbin();
  const std::vector<FatbinEntry> entries = FatbinEntries(fatbin);
  ASSERT_GE(entries.size(), 1u);
  const FatbinEntry& last = entries.back();
  const std::string end = std::to_string(fatbin.size());
  Bytes b = fatbin;
  Put<uint64_t>(&b, last.at + 8, last.payload_size + 8);
  EXPECT_TRUE(RefusedSaying(b, {"entry " + std::to_string(entries.size() - 1), "payload ends at byte " +
                                    std::to_string(fatbin.size() + 8),
                                "but the fatbin ends at byte " + end}));
  b = fatbin;
  Put<uint32_t>(&b, last.at + 4, uint32_t(fatbin.size()));
  EXPECT_TRUE(RefusedSaying(b, {"header ends at byte", "but the fatbin ends at byte " + end}));
  b = fatbin;
  Put<uint32_t>(&b, entries[0].at + 4, 8);
  EXPECT_TRUE(RefusedSaying(b, {"entry 0 (at byte 16) with a header of 8 bytes"}));
  // Room for less than an entry header after the last entry.
  b = fatbin;
  b.resize(b.size() + 8, 0);
  Put<uint64_t>(&b, 8, Get<uint64_t>(b, 8) + 8);
  EXPECT_TRUE(RefusedSaying(b, {"entry " + std::to_string(entries.size()) + " (at byte " + end +
                                    ") header ends at byte " + std::to_string(fatbin.size() + 16)}));
  b = fatbin;
  Put<uint64_t>(&b, 8, 0);
  EXPECT_TRUE(RefusedSaying(b, {"holds no entries"}));
  b = fatbin;
  Put<uint16_t>(&b, 6, 8);
  EXPECT_TRUE(RefusedSaying(b, {"header of 8 bytes (headerSize)"}));
  b = fatbin;
  Put<uint16_t>(&b, 6, 0xFFF8);
  EXPECT_TRUE(RefusedSaying(b, {"the fatbin's header ends at byte 65528 (headerSize)"}));
}

TEST(ImageCheckTest, TheCubinInsideAFatbinIsCheckedWithinItsPayload) {
  const Bytes fatbin = RealFatbin();
  const FatbinEntry e = CubinEntry(fatbin);
  Bytes b = fatbin;
  Put<uint64_t>(&b, e.payload + kShoff, e.payload_size - 64);
  EXPECT_TRUE(RefusedSaying(
      b, {"the cubin in fatbin entry 0's section header table ends at byte",
          "but the entry's payload (at byte " + std::to_string(e.payload) + ") is " +
              std::to_string(e.payload_size) + " bytes"}));
  b = fatbin;
  Put<uint16_t>(&b, e.payload + 18, 62);  // EM_X86_64
  EXPECT_TRUE(RefusedSaying(b, {"machine 62"}));
}

TEST(ImageCheckTest, HeadersThatAreNotACudaElf64) {
  const Bytes cubin = RealCubin();
  Bytes b = cubin;
  b[4] = 1;
  EXPECT_TRUE(RefusedSaying(b, {"32-bit ELF (ELFCLASS32)"}));
  b = cubin;
  b[4] = 9;
  EXPECT_TRUE(RefusedSaying(b, {"ELF class 9"}));
  b = cubin;
  b[5] = 2;
  EXPECT_TRUE(RefusedSaying(b, {"little-endian"}));
  b = cubin;
  Put<uint16_t>(&b, 18, 62);
  EXPECT_TRUE(RefusedSaying(b, {"machine 62, not a CUDA cubin (e_machine EM_CUDA, 190)"}));
  b = cubin;
  Put<uint16_t>(&b, kEhsize, 32);
  EXPECT_TRUE(RefusedSaying(b, {"ELF header of 32 bytes (e_ehsize)"}));
  b = cubin;
  Put<uint16_t>(&b, kShentsize, 40);
  EXPECT_TRUE(RefusedSaying(b, {"section headers of 40 bytes"}));
  b = cubin;
  Put<uint16_t>(&b, kPhentsize, 8);
  EXPECT_TRUE(RefusedSaying(b, {"program headers of 8 bytes"}));
}

TEST(ImageCheckTest, ReferencesALoaderFollows) {
  const Bytes cubin = RealCubin();
  const uint64_t shnum = Get<uint16_t>(cubin, kShnum);
  Bytes b = cubin;
  Put<uint16_t>(&b, kShstrndx, shnum);
  EXPECT_TRUE(RefusedSaying(b, {"e_shstrndx"}));
  // A string table without its final NUL.
  b = cubin;
  const uint64_t strtab = FindSection(b, 0, 3);
  const uint64_t strtab_header = SectionHeader(b, 0, strtab);
  b[Get<uint64_t>(b, strtab_header + 24) + Get<uint64_t>(b, strtab_header + 32) - 1] = 'x';
  EXPECT_TRUE(RefusedSaying(b, {"does not end with a NUL byte"}));
  // A section name past the name table.
  b = cubin;
  Put<uint32_t>(&b, SectionHeader(b, 0, 5), 0x7FFFFFFF);
  EXPECT_TRUE(RefusedSaying(b, {"gives section 5 a name at byte 2147483647"}));
  // Symbol tables.
  const uint64_t symtab = FindSection(cubin, 0, 2);
  const uint64_t symtab_header = SectionHeader(cubin, 0, symtab);
  b = cubin;
  Put<uint64_t>(&b, symtab_header + 56, 0);
  EXPECT_TRUE(RefusedSaying(b, {"symbol table", "entries of 0 bytes"}));
  b = cubin;
  Put<uint32_t>(&b, symtab_header + 40, 9999);
  EXPECT_TRUE(RefusedSaying(b, {"sh_link 9999 is not a string table"}));
  b = cubin;
  Put<uint32_t>(&b, Get<uint64_t>(cubin, symtab_header + 24) + 24, 0x7FFFFFF0);  // symbol 1's name
  EXPECT_TRUE(RefusedSaying(b, {"symbol 1", "named at byte 2147483632"}));
  b = cubin;
  Put<uint16_t>(&b, Get<uint64_t>(cubin, symtab_header + 24) + 24 + 6, 0x1000);  // st_shndx
  EXPECT_TRUE(RefusedSaying(b, {"symbol 1", "in section 4096"}));
  // Relocations (the test cubin has a .rela section).
  const uint64_t rela = FindSection(cubin, 0, 4);
  const uint64_t rela_header = SectionHeader(cubin, 0, rela);
  b = cubin;
  Put<uint64_t>(&b, Get<uint64_t>(cubin, rela_header + 24) + 8, uint64_t{0x7FFF} << 32);
  EXPECT_TRUE(RefusedSaying(b, {"relocation 0", "symbol 32767"}));
  b = cubin;
  Put<uint32_t>(&b, rela_header + 44, 5000);
  EXPECT_TRUE(RefusedSaying(b, {"for section 5000 (sh_info)"}));
  b = cubin;
  Put<uint32_t>(&b, rela_header + 40, strtab);
  EXPECT_TRUE(RefusedSaying(b, {"is not a symbol table"}));
}

TEST(ImageCheckTest, ExtendedSectionNumberingIsFollowed) {
  // e_shnum 0 and e_shstrndx SHN_XINDEX: section 0 holds both.
  const Bytes cubin = RealCubin();
  Bytes b = cubin;
  const uint64_t shnum = Get<uint16_t>(b, kShnum), shstrndx = Get<uint16_t>(b, kShstrndx);
  Put<uint16_t>(&b, kShnum, 0);
  Put<uint16_t>(&b, kShstrndx, 0xFFFF);
  Put<uint64_t>(&b, SectionHeader(b, 0, 0) + 32, shnum);
  Put<uint32_t>(&b, SectionHeader(b, 0, 0) + 40, uint32_t(shstrndx));
  EXPECT_EQ(Check(b).code, VYRE_STATUS_OK) << Check(b).message;
  Put<uint64_t>(&b, SectionHeader(b, 0, 0) + 32, 100000);
  EXPECT_TRUE(RefusedSaying(b, {"section header table ends at byte"}));
}

TEST(ImageCheckTest, OtherFormatsNameTheFormatsAccepted) {
  const std::string ptx = vyre_test_kernels_ptx;
  EXPECT_TRUE(RefusedSaying(Bytes(ptx.begin(), ptx.end()),
                            {"neither a cubin (ELF", "nor a fatbin", "VYRE_CODE_PTX",
                             "VYRE_CODE_CUDA_SOURCE"}));
  EXPECT_TRUE(RefusedSaying(Bytes{0x7F, 'E', 'L', 'G'}, {"7f 45 4c 47", "neither a cubin"}));
  EXPECT_TRUE(RefusedSaying(Bytes{0x01}, {"starts with the bytes 01,"}));
  Bytes wrapper(24, 0);
  Put<uint32_t>(&wrapper, 0, 0x466243B1);
  EXPECT_TRUE(RefusedSaying(wrapper, {"fatbin wrapper (__fatBinC_Wrapper_t", "data field"}));
}

TEST(ImageCheckTest, CodeTextWithANul) {
  EXPECT_TRUE(vyre::CheckCodeText("test", "PTX", "abc", 3).ok());
  absl::Status status = vyre::CheckCodeText("test", "PTX", "ab\0cd", 5);
  EXPECT_EQ(vyre::PublicCode(status), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(MessageLayoutOk(std::string(status.message())));
  EXPECT_NE(std::string(status.message()).find("the PTX has a NUL byte at offset 2, before "
                                               "code_size 5"),
            std::string::npos)
      << status.message();
}

// ---------------------------------------------------------------------------
// The fake driver's parser on forged images that lie inside their buffer
// ---------------------------------------------------------------------------

TEST_F(ImageTest, TheFakeDriverSurvivesForgedReferences) {
  using vyre::driver::Api;
  CUdevice device = 0;
  ASSERT_EQ(Api().cuDeviceGet(&device, 0), CUDA_SUCCESS);
  CUcontext primary = nullptr;
  ASSERT_EQ(Api().cuDevicePrimaryCtxRetain(&primary, device), CUDA_SUCCESS);
  ASSERT_EQ(Api().cuCtxSetCurrent(primary), CUDA_SUCCESS);
  const Bytes cubin = RealCubin(), fatbin = RealFatbin();
  const uint64_t symtab_header = SectionHeader(cubin, 0, FindSection(cubin, 0, 2));
  const uint64_t strtab_header = SectionHeader(cubin, 0, FindSection(cubin, 0, 3));
  const FatbinEntry entry = CubinEntry(fatbin);
  std::vector<Bytes> forged;
  auto cubin_with = [&](uint64_t at, uint64_t value, int bytes) {
    Bytes b = cubin;
    std::memcpy(b.data() + at, &value, bytes);
    forged.push_back(b);
  };
  cubin_with(symtab_header + 56, 0, 8);                 // symbol entry size 0
  cubin_with(symtab_header + 40, 0xFFFFFFFF, 4);        // string table index
  cubin_with(symtab_header + 24, kMax64 - 8, 8);        // symbols offset
  cubin_with(symtab_header + 32, kMax64, 8);            // symbols size
  cubin_with(strtab_header + 24, kMax64 - 8, 8);        // strings offset
  cubin_with(strtab_header + 32, kMax64, 8);            // strings size
  cubin_with(kShentsize, 8, 2);                         // section header size
  cubin_with(Get<uint64_t>(cubin, symtab_header + 24) + 24 * 5, 0x7FFFFFF0, 4);  // a name
  {
    Bytes b = cubin;  // a string table without its final NUL
    b[Get<uint64_t>(b, strtab_header + 24) + Get<uint64_t>(b, strtab_header + 32) - 1] = 'x';
    forged.push_back(b);
  }
  auto fatbin_with = [&](uint64_t at, uint64_t value, int bytes) {
    Bytes b = fatbin;
    std::memcpy(b.data() + at, &value, bytes);
    forged.push_back(b);
  };
  fatbin_with(8, kMax64 - 4, 8);               // fatSize overflows
  fatbin_with(6, 0, 2);                        // headerSize 0
  fatbin_with(entry.at + 4, 0, 4);             // entry header 0 (once an endless loop)
  fatbin_with(entry.at + 4, 3, 4);             // entry header 3
  fatbin_with(entry.at + 8, kMax64 - 16, 8);   // payload size overflows
  fatbin_with(entry.payload + kShoff, kMax64 - 100, 8);  // the inner cubin's tables
  fatbin_with(entry.payload + kShnum, 0xFFFF, 2);
  for (size_t i = 0; i < forged.size(); ++i) {
    SCOPED_TRACE("forged image " + std::to_string(i));
    std::unique_ptr<unsigned char[]> copy(new unsigned char[forged[i].size()]);
    std::memcpy(copy.get(), forged[i].data(), forged[i].size());
    CUmodule module = nullptr;
    const CUresult r = Api().cuModuleLoadDataEx(&module, copy.get(), 0, nullptr, nullptr);
    if (r == CUDA_SUCCESS) {
      EXPECT_EQ(Api().cuModuleUnload(module), CUDA_SUCCESS);
    }
  }
  EXPECT_EQ(Api().cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(Api().cuDevicePrimaryCtxRelease(device), CUDA_SUCCESS);
}

}  // namespace
}  // namespace vyre_test
