// Package testkernels holds the PTX of the test kernels (the hand-written PTX
// of tests/support/test_kernels.cu), shared by the tests and the examples.
// The fake CUDA driver (tests/support/libfake_cuda.so) recognises them by
// entry name and runs them on the host; a GPU runs this code.
//
// The *.ptx files here are copies of tests/kernels/*.ptx, the one source of
// every binding's test kernels (go:embed cannot reach outside the module):
// edit those and run scripts/sync-test-kernels.py; the ctest entry
// unit.test_kernel_copies fails while a copy differs.
package testkernels

import _ "embed" // for go:embed

// AddPTX: vyre_test_add_u32(const u32* a, const u32* b, u32* out, const u32* params):
// out[i] = a[i] + b[i] for i < params[0].
//
//go:embed add_u32.ptx
var AddPTX string

// IncPTX: vyre_test_inc_u32(u32* data, const u32* params): data[i] += 1 for i < params[0].
//
//go:embed inc_u32.ptx
var IncPTX string

// SaxpyPTX: vyre_test_saxpy_f32(float a, const float* x, float* y, u64 n):
// y[i] = a * x[i] + y[i] for i < n; a Triton-style signature (scalars and
// pointers, no parameter block) bound through an explicit parameter list.
//
//go:embed saxpy_f32.ptx
var SaxpyPTX string

// ProbePTX: vyre_test_probe_params(u64 a, const void* b, u32 c, const u32* d):
// does nothing; the fake driver records a, b, c and d[0].
//
//go:embed probe_params.ptx
var ProbePTX string

// CountdownPTX: vyre_test_countdown_u32(u32* data, u32* flag, const u32* params):
// for i < params[0], a positive data[i] drops by one and *flag = 1 while it
// is still positive after (a loop graph's condition word).
//
//go:embed countdown_u32.ptx
var CountdownPTX string

// Entry names.
const (
	AddEntry       = "vyre_test_add_u32"
	IncEntry       = "vyre_test_inc_u32"
	SaxpyEntry     = "vyre_test_saxpy_f32"
	ProbeEntry     = "vyre_test_probe_params"
	CountdownEntry = "vyre_test_countdown_u32"
)
