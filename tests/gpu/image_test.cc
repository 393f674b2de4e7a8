// Kernel images cut short, on the real driver: every prefix length of a real
// sm_90 cubin and fatbin (tests/support/test_kernels.cu built by nvcc, the
// vyre_test_kernel_binaries library) goes through vyre_program_create. Only
// the whole image loads, and its kernel runs; every shorter length is
// INVALID_ARGUMENT naming the bytes given, refused before libcuda reads it
// (which once crashed at 24 or 32 bytes and hung at 1000). No crash, no hang.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gpu_test_env.h"

// The test kernels as an sm_90 cubin and fatbin (tests/support/CMakeLists.txt).
extern const unsigned char vyre_test_kernels_cubin[];
extern const size_t vyre_test_kernels_cubin_size;
extern const unsigned char vyre_test_kernels_fatbin[];
extern const size_t vyre_test_kernels_fatbin_size;

namespace vyre_test {
namespace {

class ImageTest : public GpuTest {
 protected:
  // vyre_program_create of vyre_test_add_u32 from a heap block of exactly
  // `size` bytes of `image`.
  vyre_status Create(const unsigned char* image, size_t size, vyre_program* out) {
    std::unique_ptr<unsigned char[]> copy(new unsigned char[size == 0 ? 1 : size]);
    if (size > 0) std::memcpy(copy.get(), image, size);
    const std::vector<vyre_binding_decl> decls = {Decl(VYRE_ROLE_INPUT, 4, "a"),
                                                  Decl(VYRE_ROLE_INPUT, 4, "b"),
                                                  Decl(VYRE_ROLE_OUTPUT, 4, "out")};
    vyre_program_desc desc = VYRE_PROGRAM_DESC_INIT;
    desc.code_kind = VYRE_CODE_BINARY;
    desc.code = copy.get();
    desc.code_size = size;
    desc.entry = "vyre_test_add_u32";
    desc.bindings = decls.data();
    desc.binding_count = decls.size();
    desc.workgroup_size[0] = 256;
    return vyre_program_create(context(), &desc, out);
  }

  void ExpectAddWorks(vyre_program program) {
    const size_t n = 1000;
    const std::vector<uint32_t> a = rng().NonZeroU32(n);
    const std::vector<uint32_t> b = rng().NonZeroU32(n);
    std::vector<uint32_t> out(n, kPoisonU32);
    const std::vector<vyre_dispatch_binding> bindings = {HostIn(a.data(), ByteSize(a)),
                                                         HostIn(b.data(), ByteSize(b)),
                                                         HostOut(out.data(), ByteSize(out))};
    const std::vector<uint32_t> params = {static_cast<uint32_t>(n)};
    const vyre_dispatch_desc desc = DispatchDesc(bindings, params);
    ASSERT_VYRE_OK(vyre_dispatch(program, &desc, nullptr));
    EXPECT_TRUE(AllElementsEqual(out, [&](size_t i) { return a[i] + b[i]; }, "vyre_test_add_u32"));
  }

  // Every length 0 .. size - 1 is refused; the whole image loads when this
  // device can run it (`loads`).
  void ExpectOnlyTheWholeImageLoads(const char* name, const unsigned char* image, size_t size,
                                    bool loads) {
    const auto start = std::chrono::steady_clock::now();
    for (size_t n = 0; n < size; ++n) {
      vyre_program program{0};
      const vyre_status status = Create(image, n, &program);
      if (status == VYRE_STATUS_OK) {
        EXPECT_VYRE_OK(vyre_program_destroy(program));
        FAIL() << "a prefix of " << n << " of the " << size << " bytes of the " << name
               << " loaded";
      }
      ASSERT_EQ(status, VYRE_STATUS_INVALID_ARGUMENT)
          << name << " cut to " << n << " bytes: " << DescribeLastError();
      const std::string message = LastErrorMessage();
      ASSERT_TRUE(MessageContains(message, {"code_size is " + std::to_string(n), ". Fix: "}))
          << name << " cut to " << n << " bytes";
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%zu prefixes of the %zu-byte %s refused in %.2f s\n", size, size, name, seconds);
    ProgramHandle program;
    const vyre_status status = Create(image, size, program.out());
    if (!loads) {
      // No code for this device in the image: the driver's refusal, no crash.
      EXPECT_NE(status, VYRE_STATUS_OK);
      std::printf("the whole %s has no code for sm_%u%u: %s\n", name,
                  device().compute_capability_major, device().compute_capability_minor,
                  DescribeLastError().c_str());
      return;
    }
    ASSERT_VYRE_OK(status);
    ExpectAddWorks(program.get());
  }
};

TEST_F(ImageTest, EveryPrefixOfAnSm90CubinIsRefusedAndOnlyTheWholeLoads) {
  const bool sm90 =
      device().compute_capability_major == 9 && device().compute_capability_minor == 0;
  ExpectOnlyTheWholeImageLoads("cubin", vyre_test_kernels_cubin, vyre_test_kernels_cubin_size,
                               sm90);
}

TEST_F(ImageTest, EveryPrefixOfAnSm90FatbinIsRefusedAndOnlyTheWholeLoads) {
  // The fatbin holds sm_90 code and compute_90 PTX: any device of 9.0 or newer.
  const bool loads = device().compute_capability_major >= 9;
  ExpectOnlyTheWholeImageLoads("fatbin", vyre_test_kernels_fatbin, vyre_test_kernels_fatbin_size,
                               loads);
}

}  // namespace
}  // namespace vyre_test
