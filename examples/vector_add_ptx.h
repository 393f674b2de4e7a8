/*
 * vector_add_ptx.h — hand-written PTX shared by the vector-add examples.
 *
 *   vyre_example_add_u32(const u32* a, const u32* b, u32* out, const u32* params)
 *     out[i] = a[i] + b[i] for every i < params[0]
 *
 * This is vyre-cuda's default calling convention: one device pointer per
 * non-SHARED binding in declaration order, then the pointer to the u32
 * parameter words. PTX 7.0 for sm_75 is JIT-compiled by the driver for any
 * newer GPU. Check it with: ptxas -arch=sm_90 <file.ptx>
 *
 * Generated from tests/kernels/add_u32.ptx,
 * with the entry renamed from vyre_test_add_u32 (the code is the same), by
 * scripts/sync-test-kernels.py: edit that file and rerun the script (ctest
 * unit.test_kernel_copies fails while this copy differs).
 */
#ifndef VYRE_EXAMPLES_VECTOR_ADD_PTX_H_
#define VYRE_EXAMPLES_VECTOR_ADD_PTX_H_

#define VYRE_EXAMPLE_ADD_ENTRY "vyre_example_add_u32"

/* NUL-terminated, so the program descriptor can leave code_size at 0. */
static const char kVectorAddPtx[] =
    ".version 7.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry vyre_example_add_u32(\n"
    "  .param .u64 param_a,\n"
    "  .param .u64 param_b,\n"
    "  .param .u64 param_out,\n"
    "  .param .u64 param_words\n"
    ")\n"
    "{\n"
    "  .reg .pred   %p<2>;\n"
    "  .reg .b32   %r<8>;\n"
    "  .reg .b64   %rd<16>;\n"
    "\n"
    "  // n = params[0], widened so the index comparison cannot wrap.\n"
    "  ld.param.u64   %rd1, [param_words];\n"
    "  cvta.to.global.u64   %rd2, %rd1;\n"
    "  ld.global.u32   %r1, [%rd2];\n"
    "  cvt.u64.u32   %rd3, %r1;\n"
    "\n"
    "  // i = blockIdx.x * blockDim.x + threadIdx.x, computed in 64 bits.\n"
    "  mov.u32   %r2, %ctaid.x;\n"
    "  mov.u32   %r3, %ntid.x;\n"
    "  mov.u32   %r4, %tid.x;\n"
    "  mul.wide.u32   %rd4, %r2, %r3;\n"
    "  cvt.u64.u32   %rd5, %r4;\n"
    "  add.s64   %rd6, %rd4, %rd5;\n"
    "  setp.ge.u64   %p1, %rd6, %rd3;\n"
    "  @%p1 bra   DONE;\n"
    "\n"
    "  // byte offset = i * 4\n"
    "  shl.b64   %rd7, %rd6, 2;\n"
    "  ld.param.u64   %rd8, [param_a];\n"
    "  cvta.to.global.u64   %rd9, %rd8;\n"
    "  add.s64   %rd10, %rd9, %rd7;\n"
    "  ld.global.u32   %r5, [%rd10];\n"
    "  ld.param.u64   %rd11, [param_b];\n"
    "  cvta.to.global.u64   %rd12, %rd11;\n"
    "  add.s64   %rd13, %rd12, %rd7;\n"
    "  ld.global.u32   %r6, [%rd13];\n"
    "  add.s32   %r7, %r5, %r6;\n"
    "  ld.param.u64   %rd14, [param_out];\n"
    "  cvta.to.global.u64   %rd15, %rd14;\n"
    "  add.s64   %rd15, %rd15, %rd7;\n"
    "  st.global.u32   [%rd15], %r7;\n"
    "\n"
    "DONE:\n"
    "  ret;\n"
    "}\n";

#endif /* VYRE_EXAMPLES_VECTOR_ADD_PTX_H_ */
