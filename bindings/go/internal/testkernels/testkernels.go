// Package testkernels holds the PTX of the test kernels of
// tests/support/test_kernels.cu, shared by the tests and the examples. The
// fake CUDA driver (tests/support/libfake_cuda.so) recognises them by entry
// name and runs them on the host; a GPU runs this code.
package testkernels

// AddPTX: vyre_test_add_u32(const u32* a, const u32* b, u32* out, const u32* params):
// out[i] = a[i] + b[i] for i < params[0].
const AddPTX = `.version 7.0
.target sm_75
.address_size 64

.visible .entry vyre_test_add_u32(
  .param .u64 param_a,
  .param .u64 param_b,
  .param .u64 param_out,
  .param .u64 param_words
)
{
  .reg .pred   %p<2>;
  .reg .b32   %r<8>;
  .reg .b64   %rd<16>;

  ld.param.u64   %rd1, [param_words];
  cvta.to.global.u64   %rd2, %rd1;
  ld.global.u32   %r1, [%rd2];
  cvt.u64.u32   %rd3, %r1;
  mov.u32   %r2, %ctaid.x;
  mov.u32   %r3, %ntid.x;
  mov.u32   %r4, %tid.x;
  mul.wide.u32   %rd4, %r2, %r3;
  cvt.u64.u32   %rd5, %r4;
  add.s64   %rd6, %rd4, %rd5;
  setp.ge.u64   %p1, %rd6, %rd3;
  @%p1 bra   DONE;
  shl.b64   %rd7, %rd6, 2;
  ld.param.u64   %rd8, [param_a];
  cvta.to.global.u64   %rd9, %rd8;
  add.s64   %rd10, %rd9, %rd7;
  ld.global.u32   %r5, [%rd10];
  ld.param.u64   %rd11, [param_b];
  cvta.to.global.u64   %rd12, %rd11;
  add.s64   %rd13, %rd12, %rd7;
  ld.global.u32   %r6, [%rd13];
  add.s32   %r7, %r5, %r6;
  ld.param.u64   %rd14, [param_out];
  cvta.to.global.u64   %rd15, %rd14;
  add.s64   %rd15, %rd15, %rd7;
  st.global.u32   [%rd15], %r7;
DONE:
  ret;
}
`

// IncPTX: vyre_test_inc_u32(u32* data, const u32* params): data[i] += 1 for i < params[0].
const IncPTX = `.version 7.0
.target sm_75
.address_size 64

.visible .entry vyre_test_inc_u32(
  .param .u64 param_data,
  .param .u64 param_words
)
{
  .reg .pred   %p<2>;
  .reg .b32   %r<7>;
  .reg .b64   %rd<10>;

  ld.param.u64   %rd1, [param_words];
  cvta.to.global.u64   %rd2, %rd1;
  ld.global.u32   %r1, [%rd2];
  cvt.u64.u32   %rd3, %r1;
  mov.u32   %r2, %ctaid.x;
  mov.u32   %r3, %ntid.x;
  mov.u32   %r4, %tid.x;
  mul.wide.u32   %rd4, %r2, %r3;
  cvt.u64.u32   %rd5, %r4;
  add.s64   %rd6, %rd4, %rd5;
  setp.ge.u64   %p1, %rd6, %rd3;
  @%p1 bra   DONE;
  shl.b64   %rd7, %rd6, 2;
  ld.param.u64   %rd8, [param_data];
  cvta.to.global.u64   %rd9, %rd8;
  add.s64   %rd9, %rd9, %rd7;
  ld.global.u32   %r5, [%rd9];
  add.s32   %r6, %r5, 1;
  st.global.u32   [%rd9], %r6;
DONE:
  ret;
}
`

// SaxpyPTX: vyre_test_saxpy_f32(float a, const float* x, float* y, u64 n):
// y[i] = a * x[i] + y[i] for i < n; a Triton-style signature (scalars and
// pointers, no parameter block) bound through an explicit parameter list.
const SaxpyPTX = `.version 7.0
.target sm_75
.address_size 64

.visible .entry vyre_test_saxpy_f32(
  .param .f32 param_a,
  .param .u64 param_x,
  .param .u64 param_y,
  .param .u64 param_n
)
{
  .reg .pred   %p<2>;
  .reg .f32   %f<5>;
  .reg .b32   %r<4>;
  .reg .b64   %rd<12>;

  ld.param.f32   %f1, [param_a];
  ld.param.u64   %rd2, [param_x];
  ld.param.u64   %rd3, [param_y];
  ld.param.u64   %rd4, [param_n];
  mov.u32   %r1, %ctaid.x;
  mov.u32   %r2, %ntid.x;
  mul.wide.u32   %rd5, %r1, %r2;
  mov.u32   %r3, %tid.x;
  cvt.u64.u32   %rd6, %r3;
  add.s64   %rd1, %rd5, %rd6;
  setp.ge.u64   %p1, %rd1, %rd4;
  @%p1 bra   DONE;
  cvta.to.global.u64   %rd7, %rd3;
  cvta.to.global.u64   %rd8, %rd2;
  shl.b64   %rd9, %rd1, 2;
  add.s64   %rd10, %rd8, %rd9;
  ld.global.f32   %f2, [%rd10];
  add.s64   %rd11, %rd7, %rd9;
  ld.global.f32   %f3, [%rd11];
  fma.rn.f32   %f4, %f2, %f1, %f3;
  st.global.f32   [%rd11], %f4;
DONE:
  ret;
}
`

// ProbePTX: vyre_test_probe_params(u64 a, const void* b, u32 c, const u32* d):
// does nothing; the fake driver records a, b, c and d[0].
const ProbePTX = `.version 7.0
.target sm_75
.address_size 64

.visible .entry vyre_test_probe_params(
  .param .u64 param_a,
  .param .u64 param_b,
  .param .u32 param_c,
  .param .u64 param_d
)
{
  ret;
}
`

// Entry names.
const (
	AddEntry   = "vyre_test_add_u32"
	IncEntry   = "vyre_test_inc_u32"
	SaxpyEntry = "vyre_test_saxpy_f32"
	ProbeEntry = "vyre_test_probe_params"
)
