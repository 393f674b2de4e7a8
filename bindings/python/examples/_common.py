"""Shared by the Python examples: the kernels (the same PTX as the C, Rust and
Go examples), the exit-code rule and the element checks.

Not an example itself. The examples import it from their own directory, which
Python puts first on sys.path when it runs a script.
"""

import array
import os
import sys

import vyre_cuda as vc

# array.array's type code for 4-byte unsigned items ("I" on the usual platforms).
U32 = "I" if array.array("I").itemsize == 4 else "L"

# The kernels' PTX: tests/kernels of the repository, the one source of every
# binding's test kernels.
KERNELS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                           "tests", "kernels")


def _kernel(name):
    with open(os.path.join(KERNELS_DIR, name), encoding="utf-8", newline="") as f:
        return f.read()


#: vyre_example_add_u32(const u32* a, const u32* b, u32* out, const u32* params):
#: out[i] = a[i] + b[i] for every i < params[0]. vyre-cuda's default calling
#: convention: one pointer per binding, then the parameter words.
#: tests/kernels/add_u32.ptx under the C examples' entry name, as
#: examples/vector_add_ptx.h has it.
ADD_ENTRY = "vyre_example_add_u32"
ADD_PTX = _kernel("add_u32.ptx").replace(".entry vyre_test_add_u32(", f".entry {ADD_ENTRY}(")

#: vyre_test_saxpy_f32(float a, const float* x, float* y, u64 n):
#: y[i] = a * x[i] + y[i] for every i < n. The signature Triton emits:
#: scalars by value and pointers, no parameter block, so the program declares
#: its parameter list explicitly. (The test suite's fake driver runs a kernel
#: of this name on the host.)
SAXPY_ENTRY = "vyre_test_saxpy_f32"
SAXPY_PTX = _kernel("saxpy_f32.ptx")

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
