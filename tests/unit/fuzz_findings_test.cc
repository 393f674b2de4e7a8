// What the fuzz targets (tests/fuzz) found, one named test per finding, on
// the fake driver through the public API. The crashing inputs themselves are
// kept in tests/fuzz/regressions/<target>/ and replayed by the fuzz preset's
// ctest (fuzz_regression.<target>.<name>); these tests state each case
// directly, so they hold even when a target's input decoding changes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api_fake_fixture.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace {

using FuzzFindingsTest = FakeDriverTest;

// dispatch target, regressions/dispatch/derived_grid_element_count_near_2pow64.bin:
// with an all-zero grid the engine derived blocks as
// (element_count + threads - 1) / threads, which wraps for element counts
// within a block of 2^64 and gave a grid of 0 blocks: cuLaunchKernel was
// called with grid 0x1x1 (CUDA_ERROR_INVALID_VALUE from a real driver,
// DRIVER_ERROR to the caller). Such a count needs more blocks than any grid
// holds: LIMIT_EXCEEDED, before anything reaches the driver.
TEST_F(FuzzFindingsTest, DerivedGridForElementCountNear2To64IsLimitExceeded) {
  vyre_program program = MakeProgram(context_, IncSpec());
  ASSERT_NE(program.bits, 0u);
  std::vector<uint32_t> data(64, 1);
  const uint32_t words[1] = {0};
  for (uint64_t element_count :
       {UINT64_MAX, UINT64_MAX - 16, UINT64_MAX - 255, UINT64_MAX - 256, uint64_t{1} << 63}) {
    DispatchSpec spec;
    spec.bindings = {HostInOut(data.data(), ByteSize(data))};
    spec.param_words = {words[0]};
    spec.element_count = element_count;
    vyre_dispatch_desc desc = spec.Desc();
    const uint64_t launches = FakeCuda::Stats().kernel_launches;
    EXPECT_VYRE_ERROR(vyre_dispatch(program, &desc, nullptr), VYRE_STATUS_LIMIT_EXCEEDED)
        << "element_count " << element_count;
    EXPECT_EQ(FakeCuda::Stats().kernel_launches, launches) << "element_count " << element_count;
  }
  EXPECT_VYRE_OK(vyre_program_destroy(program));
}

// program_create target, regressions/program_create/ptx_with_elf_magic_read_as_cubin.bin:
// cuModuleLoadDataEx picks the format from the image's first bytes, not
// from code_kind, so VYRE_CODE_PTX whose text began with the ELF magic went
// to the driver unchecked and was parsed as a cubin: the fake driver read
// its headers past the end of the 10-byte text (a real driver crashes or
// hangs the same way on a cut-short cubin). The same for the fatbin magic
// and a fatbin wrapper's. Such PTX is refused before any module load.
TEST_F(FuzzFindingsTest, PtxStartingWithABinaryMagicIsRefused) {
  const std::string magics[] = {std::string("\x7f"
                                            "ELF\x02\x01\x01\x33\x07\x00",
                                            10),
                                std::string("\x50\xed\x55\xba\x01\x01\x10\x01", 8),
                                std::string("\xb1\x43\x62\x46\x01\x02\x03\x04", 8)};
  for (const std::string& code : magics) {
    for (size_t code_size : {size_t{0}, code.size()}) {
      ProgramSpec spec = IncSpec();
      spec.code = code;
      vyre_program_desc desc = spec.Desc();
      desc.code_size = code_size;
      vyre_program program{0};
      const uint64_t loads = FakeCuda::Stats().module_loads;
      EXPECT_VYRE_ERROR(vyre_program_create(context_, &desc, &program),
                        VYRE_STATUS_INVALID_ARGUMENT)
          << "magic 0x" << std::hex << static_cast<unsigned>(static_cast<uint8_t>(code[0]))
          << ", code_size " << std::dec << code_size;
      EXPECT_EQ(program.bits, 0u);
      EXPECT_EQ(FakeCuda::Stats().module_loads, loads);
    }
  }
  // The same bytes as a binary go through the image checks: refused too.
  ProgramSpec spec = IncSpec();
  spec.code_kind = VYRE_CODE_BINARY;
  spec.code = magics[0];
  vyre_program_desc desc = spec.Desc();
  vyre_program program{0};
  EXPECT_VYRE_ERROR(vyre_program_create(context_, &desc, &program), VYRE_STATUS_INVALID_ARGUMENT);
}

// dispatch target, regressions/dispatch/replay_count_in_capacity_class_over_grid_limit.bin:
// a graph recorded with a derived grid may be replayed for any count up to
// the next power of two of the recorded one, but the replay derived its
// grid from that count without the device's grid limit: recorded near the
// largest count the grid covers, a replay inside the capacity class set a
// kernel node's grid x past max_grid_dim[0] (cuGraphExecKernelNodeSetParams:
// CUDA_ERROR_INVALID_VALUE, DRIVER_ERROR to the caller). The capacity class
// now stops at what the largest grid covers, and a count past it is
// LIMIT_EXCEEDED before any node changes.
TEST_F(FuzzFindingsTest, GraphReplayCountPastTheGridLimitIsLimitExceeded) {
  vyre_device_info device = VYRE_DEVICE_INFO_INIT;
  ASSERT_VYRE_OK(vyre_device_info_get(0, &device));
  const uint64_t max_grid_x = device.max_grid_dim[0];
  for (uint32_t threads : {1u, 256u}) {
    ProgramSpec ps = IncSpec();
    ps.workgroup[0] = threads;
    vyre_program program = MakeProgram(context_, ps);
    ASSERT_NE(program.bits, 0u);
    const uint64_t coverable = max_grid_x * threads;
    // The fake device's grid x is 2^31 - 1: the next power of two of the
    // recorded count lies past what the grid covers.
    const uint64_t recorded = coverable - threads + 1;
    uint64_t next_power_of_two = 1;
    while (next_power_of_two < recorded) next_power_of_two <<= 1;
    ASSERT_GT(next_power_of_two, coverable);
    std::vector<uint32_t> data(64, 1);
    DispatchSpec spec;
    spec.bindings = {HostInOut(data.data(), ByteSize(data))};
    spec.param_words = {4};  // the kernel touches 4 elements
    spec.element_count = recorded;
    vyre_dispatch_desc desc = spec.Desc();
    vyre_graph graph{0};
    ASSERT_VYRE_OK(vyre_graph_record(program, &desc, &graph));
    vyre_graph_info info = VYRE_GRAPH_INFO_INIT;
    ASSERT_VYRE_OK(vyre_graph_info_get(graph, &info));
    EXPECT_EQ(info.element_count, recorded);
    EXPECT_EQ(info.capacity_elements, coverable) << threads << " threads";

    vyre_graph_replay_desc replay = VYRE_GRAPH_REPLAY_DESC_INIT;
    replay.bindings = desc.bindings;
    replay.binding_count = desc.binding_count;
    const uint64_t launches = FakeCuda::Stats().kernel_launches;
    for (uint64_t count : {coverable + 1, coverable + threads, uint64_t{1} << 63, UINT64_MAX}) {
      replay.element_count = count;
      EXPECT_VYRE_ERROR(vyre_graph_replay(graph, &replay, nullptr), VYRE_STATUS_LIMIT_EXCEEDED)
          << "element_count " << count << ", " << threads << " threads";
    }
    EXPECT_EQ(FakeCuda::Stats().kernel_launches, launches);
    ASSERT_VYRE_OK(vyre_graph_info_get(graph, &info));
    EXPECT_EQ(info.element_count, recorded) << "a refused replay changed the count";
    EXPECT_EQ(info.replays, 0u);

    // The largest count the grid covers still replays, with a full grid.
    replay.element_count = coverable;
    EXPECT_VYRE_OK(vyre_graph_replay(graph, &replay, nullptr));
    EXPECT_EQ(FakeCuda::Stats().last_grid[0], max_grid_x);
    EXPECT_EQ(data[0], 2u);
    EXPECT_EQ(data[4], 1u);
    EXPECT_VYRE_OK(vyre_graph_destroy(graph));
    EXPECT_VYRE_OK(vyre_program_destroy(program));
  }
}

// Copies `entries` into a caller array strided by sizeof(T) whose last entry
// claims struct_size sizeof(T) + 16, followed (outside the array, inside the
// allocation) by 16 non-zero bytes: a library that read the last entry as
// long as it claims would see them as a non-zero unknown tail.
template <typename T>
std::vector<unsigned char> ArrayWithLongerLastEntry(const std::vector<T>& entries) {
  std::vector<unsigned char> bytes(entries.size() * sizeof(T) + 16, 0x5A);
  for (size_t i = 0; i < entries.size(); ++i) {
    std::memcpy(&bytes[i * sizeof(T)], &entries[i], sizeof(T));
  }
  const uint32_t longer = sizeof(T) + 16;
  std::memcpy(&bytes[(entries.size() - 1) * sizeof(T)], &longer, sizeof longer);
  return bytes;
}

// Expects STRUCT_SIZE for the last entry's mismatch with the array's stride
// (the message names both sizes), not for a tail read past the array.
void ExpectStrideMismatch(vyre_status status, size_t stride, const char* call) {
  EXPECT_VYRE_ERROR(status, VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE) << call;
  const std::string message = LastErrorMessage();
  const std::string sizes[] = {
      std::to_string(stride + 16) + " but ",
      " has " + std::to_string(stride) + ". Fix:", " is " + std::to_string(stride) + ". Fix:"};
  EXPECT_NE(message.find(sizes[0]), std::string::npos) << call << ": " << message;
  EXPECT_TRUE(message.find(sizes[1]) != std::string::npos ||
              message.find(sizes[2]) != std::string::npos)
      << call << ": " << message;
  EXPECT_EQ(message.find("unknown tail"), std::string::npos) << call << ": " << message;
}

// program_create and dispatch targets,
// regressions/program_create/binding_decl_tail_read_past_array.bin and
// regressions/dispatch/binding_tail_read_past_array.bin (found once the
// targets passed arrays of exactly the declared size): every
// caller array of descriptors is strided by its first entry's struct_size,
// but each entry was read (and its unknown tail checked) for as many bytes as
// that entry claimed before its struct_size was compared with the stride, so
// a last entry claiming a larger struct read past the caller's array (ASan:
// heap-buffer-overflow in CheckStructSize). Binding declarations, dispatch
// and replay bindings and sequence steps now check the stride first.
TEST_F(FuzzFindingsTest, ArrayEntryClaimingALargerStructIsRefusedBeforeItsTailIsRead) {
  // vyre_program_create: binding declarations.
  {
    ProgramSpec spec = AddSpec();
    const std::vector<unsigned char> decls = ArrayWithLongerLastEntry(spec.bindings);
    vyre_program_desc desc = spec.Desc();
    desc.bindings = reinterpret_cast<const vyre_binding_decl*>(decls.data());
    vyre_program program{0};
    ExpectStrideMismatch(vyre_program_create(context_, &desc, &program), sizeof(vyre_binding_decl),
                         "vyre_program_create");
    EXPECT_EQ(program.bits, 0u);
  }
  vyre_program add = MakeProgram(context_, AddSpec());
  ASSERT_NE(add.bits, 0u);
  std::vector<uint32_t> a(16, 1), b(16, 2), out(16, 0);
  DispatchSpec spec;
  spec.bindings = {HostIn(a.data(), ByteSize(a)), HostIn(b.data(), ByteSize(b)),
                   HostOut(out.data(), ByteSize(out))};
  spec.param_words = {16};
  const std::vector<unsigned char> bindings = ArrayWithLongerLastEntry(spec.bindings);
  // vyre_dispatch and vyre_graph_record: dispatch bindings.
  {
    vyre_dispatch_desc desc = spec.Desc();
    desc.bindings = reinterpret_cast<const vyre_dispatch_binding*>(bindings.data());
    ExpectStrideMismatch(vyre_dispatch(add, &desc, nullptr), sizeof(vyre_dispatch_binding),
                         "vyre_dispatch");
    vyre_graph graph{0};
    ExpectStrideMismatch(vyre_graph_record(add, &desc, &graph), sizeof(vyre_dispatch_binding),
                         "vyre_graph_record");
    EXPECT_EQ(out[0], 0u);
  }
  // vyre_graph_replay: rebinding.
  {
    vyre_dispatch_desc desc = spec.Desc();
    vyre_graph graph{0};
    ASSERT_VYRE_OK(vyre_graph_record(add, &desc, &graph));
    vyre_graph_replay_desc replay = VYRE_GRAPH_REPLAY_DESC_INIT;
    replay.bindings = reinterpret_cast<const vyre_dispatch_binding*>(bindings.data());
    replay.binding_count = spec.bindings.size();
    ExpectStrideMismatch(vyre_graph_replay(graph, &replay, nullptr), sizeof(vyre_dispatch_binding),
                         "vyre_graph_replay");
    replay.bindings = desc.bindings;
    EXPECT_VYRE_OK(vyre_graph_replay(graph, &replay, nullptr));
    EXPECT_EQ(out[15], 3u);
    EXPECT_VYRE_OK(vyre_graph_destroy(graph));
  }
  // vyre_sequence_create: steps.
  {
    vyre_buffer buffer = MakeBuffer(context_, 64);
    ASSERT_NE(buffer.bits, 0u);
    std::vector<vyre_sequence_step> steps(2);
    for (vyre_sequence_step& step : steps) {
      step = VYRE_SEQUENCE_STEP_INIT;
      step.kind = VYRE_STEP_FILL;
      step.buffer = buffer;
      step.bytes = 64;
      step.fill_byte = 7;
    }
    const std::vector<unsigned char> raw = ArrayWithLongerLastEntry(steps);
    vyre_sequence_desc desc = VYRE_SEQUENCE_DESC_INIT;
    desc.steps = reinterpret_cast<const vyre_sequence_step*>(raw.data());
    desc.step_count = steps.size();
    vyre_sequence sequence{0};
    ExpectStrideMismatch(vyre_sequence_create(context_, &desc, &sequence),
                         sizeof(vyre_sequence_step), "vyre_sequence_create");
    EXPECT_EQ(sequence.bits, 0u);
    EXPECT_VYRE_OK(vyre_buffer_free(buffer));
  }
  EXPECT_VYRE_OK(vyre_program_destroy(add));
}

}  // namespace
}  // namespace vyre_test
