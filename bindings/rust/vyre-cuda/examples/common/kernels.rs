//! PTX of the test kernels in tests/support/test_kernels.cu (the fake CUDA
//! driver runs kernels of these names on the host; a GPU runs this code).
//! Shared by the examples and the tests.
//!
//! The *.ptx files next to this one are copies of tests/kernels/*.ptx, the
//! one source of every binding's test kernels, kept inside the crate so that
//! it packages without the repository: edit those and run
//! scripts/sync-test-kernels.py; the ctest entry unit.test_kernel_copies
//! fails while a copy differs.
#![allow(dead_code)]

/// vyre_test_add_u32(const u32* a, const u32* b, u32* out, const u32* params):
/// out[i] = a[i] + b[i] for i < params[0] (tests/support/test_kernels.cu).
pub const ADD_PTX: &str = include_str!("add_u32.ptx");

/// vyre_test_inc_u32(u32* data, const u32* params): data[i] += 1 for i < params[0].
pub const INC_PTX: &str = include_str!("inc_u32.ptx");

/// vyre_test_saxpy_f32(float a, const float* x, float* y, u64 n):
/// y[i] = a * x[i] + y[i] for i < n: a Triton-style signature (scalars and
/// pointers, no parameter block) bound through an explicit parameter list.
pub const SAXPY_PTX: &str = include_str!("saxpy_f32.ptx");

/// vyre_test_probe_params(u64 a, const void* b, u32 c, const u32* d): does
/// nothing; the fake driver records a, b, c and d[0].
pub const PROBE_PTX: &str = include_str!("probe_params.ptx");

/// vyre_test_countdown_u32(u32* data, u32* flag, const u32* params): for
/// i < params[0], a positive data[i] drops by one and *flag = 1 while it is
/// still positive after (a loop graph's condition word).
pub const COUNTDOWN_PTX: &str = include_str!("countdown_u32.ptx");
