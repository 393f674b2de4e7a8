/*
 * saxpy_ptx.h — hand-written PTX of the Triton-style saxpy example.
 *
 *   vyre_test_saxpy_f32(float a, const float* x, float* y, u64 n)
 *     y[i] = a * x[i] + y[i] for every i < n
 *
 * The signature Triton emits for such a kernel: scalars by value, pointers,
 * no parameter block. PTX 7.0 for sm_75, JIT-compiled for any newer GPU.
 * (The test suite's fake driver runs a kernel of this name on the host.)
 *
 * Generated from tests/kernels/saxpy_f32.ptx by
 * scripts/sync-test-kernels.py: edit that file and rerun the script (ctest
 * unit.test_kernel_copies fails while this copy differs).
 */
#ifndef VYRE_EXAMPLES_SAXPY_PTX_H_
#define VYRE_EXAMPLES_SAXPY_PTX_H_

#define SAXPY_ENTRY "vyre_test_saxpy_f32"

/* NUL-terminated, so the program descriptor can leave code_size at 0. */
static const char kSaxpyPtx[] =
    ".version 7.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry vyre_test_saxpy_f32(\n"
    "  .param .f32 param_a,\n"
    "  .param .u64 param_x,\n"
    "  .param .u64 param_y,\n"
    "  .param .u64 param_n\n"
    ")\n"
    "{\n"
    "  .reg .pred   %p<2>;\n"
    "  .reg .f32   %f<5>;\n"
    "  .reg .b32   %r<4>;\n"
    "  .reg .b64   %rd<12>;\n"
    "\n"
    "  ld.param.f32   %f1, [param_a];\n"
    "  ld.param.u64   %rd2, [param_x];\n"
    "  ld.param.u64   %rd3, [param_y];\n"
    "  ld.param.u64   %rd4, [param_n];\n"
    "  // i = blockIdx.x * blockDim.x + threadIdx.x, in 64 bits\n"
    "  mov.u32   %r1, %ctaid.x;\n"
    "  mov.u32   %r2, %ntid.x;\n"
    "  mul.wide.u32   %rd5, %r1, %r2;\n"
    "  mov.u32   %r3, %tid.x;\n"
    "  cvt.u64.u32   %rd6, %r3;\n"
    "  add.s64   %rd1, %rd5, %rd6;\n"
    "  setp.ge.u64   %p1, %rd1, %rd4;\n"
    "  @%p1 bra   DONE;\n"
    "  cvta.to.global.u64   %rd7, %rd3;\n"
    "  cvta.to.global.u64   %rd8, %rd2;\n"
    "  shl.b64   %rd9, %rd1, 2;\n"
    "  add.s64   %rd10, %rd8, %rd9;\n"
    "  ld.global.f32   %f2, [%rd10];\n"
    "  add.s64   %rd11, %rd7, %rd9;\n"
    "  ld.global.f32   %f3, [%rd11];\n"
    "  fma.rn.f32   %f4, %f2, %f1, %f3;\n"
    "  st.global.f32   [%rd11], %f4;\n"
    "DONE:\n"
    "  ret;\n"
    "}\n";

#endif /* VYRE_EXAMPLES_SAXPY_PTX_H_ */
