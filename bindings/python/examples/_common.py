"""Shared by the Python examples: the kernels (the same PTX as the C, Rust and
Go examples), the exit-code rule and the element checks.

Not an example itself. The examples import it from their own directory, which
Python puts first on sys.path when it runs a script.
"""

import array
import sys

import vyre_cuda as vc

# array.array's type code for 4-byte unsigned items ("I" on the usual platforms).
U32 = "I" if array.array("I").itemsize == 4 else "L"

#: vyre_example_add_u32(const u32* a, const u32* b, u32* out, const u32* params):
#: out[i] = a[i] + b[i] for every i < params[0]. vyre-cuda's default calling
#: convention: one pointer per binding, then the parameter words
#: (examples/vector_add_ptx.h).
ADD_ENTRY = "vyre_example_add_u32"
ADD_PTX = r"""
.version 7.0
.target sm_75
.address_size 64

.visible .entry vyre_example_add_u32(
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
"""

#: vyre_test_saxpy_f32(float a, const float* x, float* y, u64 n):
#: y[i] = a * x[i] + y[i] for every i < n. The signature Triton emits:
#: scalars by value and pointers, no parameter block, so the program declares
#: its parameter list explicitly. (The test suite's fake driver runs a kernel
#: of this name on the host.)
SAXPY_ENTRY = "vyre_test_saxpy_f32"
SAXPY_PTX = r"""
.version 7.0
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
"""

# Statuses that mean "this machine cannot run CUDA work": exit 2.
NO_GPU = (vc.Status.NO_DRIVER, vc.Status.DRIVER_TOO_OLD, vc.Status.NO_DEVICE)


class Mismatch(Exception):
    """A result differs from the CPU reference."""


def element_count(default):
    """N from the command line (`example.py [N]`), else `default`."""
    if len(sys.argv) > 2:
        raise SystemExit(f"usage: {sys.argv[0]} [N]")
    if len(sys.argv) == 2:
        try:
            n = int(sys.argv[1])
        except ValueError:
            n = 0
        if not 0 < n <= 1 << 28:
            raise SystemExit(f"{sys.argv[0]}: bad N {sys.argv[1]!r}. Fix: pass 0 < N <= 268435456.")
        return n
    return default


def main(name, run):
    """Runs run() and exits: 0 when it returns, 2 when the machine cannot run
    CUDA work (no driver, driver too old, no device), 1 on any other error or
    a wrong element. Every library failure prints its message, which ends
    with a "Fix:" sentence."""
    try:
        run()
    except vc.VyreError as e:
        # e.message: the library's message with its Fix; e.call: what failed.
        print(f"{name}: {e.call} failed: {e.status_name} (CUresult {e.cu_result})\n  {e.message}",
              file=sys.stderr)
        sys.exit(2 if e.status in NO_GPU else 1)
    except vc.LibraryLoadError as e:
        # libvyre_cuda itself is missing or of another major version.
        print(f"{name}: {e}", file=sys.stderr)
        sys.exit(1)
    except Mismatch as e:
        print(f"{name}: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"{name}: OK")
    sys.exit(0)


def check(label, got, expected, seed):
    """Compares every element of `got` with `expected` (equal-length
    sequences); raises Mismatch naming the first few wrong ones."""
    if len(got) != len(expected):
        raise Mismatch(f"{label}: {len(got)} elements, expected {len(expected)}")
    bad = [i for i, (g, e) in enumerate(zip(got, expected)) if g != e]
    if bad:
        shown = ", ".join(f"[{i}] = {got[i]} (expected {expected[i]})" for i in bad[:5])
        raise Mismatch(f"{label}: {len(bad)} of {len(got)} elements wrong: {shown} "
                       f"(data seed {seed})")
