#!/usr/bin/env python3
"""Writes the copies of the test kernels (tests/kernels/*.ptx, the one
source) that the bindings and the C examples compile in, or checks them.

    scripts/sync-test-kernels.py           write every copy
    scripts/sync-test-kernels.py --check   compare, change nothing; exit 1 on
                                           any difference (ctest
                                           unit.test_kernel_copies)

The copies (tests/kernels/README.md says why each exists):
  bindings/go/internal/testkernels/*.ptx       byte copies (go:embed cannot
                                               reach outside the module)
  bindings/rust/vyre-cuda/examples/common/*.ptx  byte copies (include_str!;
                                               the crate packages without the
                                               repository)
  examples/vector_add_ptx.h                    add_u32.ptx as a C string, its
                                               entry named vyre_example_add_u32
  examples/saxpy_ptx.h                         saxpy_f32.ptx as a C string
The Python tests, examples and bench_overhead.py read tests/kernels directly.

--check also fails when a hand-written kernel (".entry vyre_test_..." or
".entry vyre_example_...") appears in a binding's or an example's source
outside these copies.
"""

import argparse
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = "tests/kernels"
KERNELS = ["add_u32.ptx", "inc_u32.ptx", "saxpy_f32.ptx", "probe_params.ptx", "countdown_u32.ptx"]
BYTE_COPY_DIRS = ["bindings/go/internal/testkernels", "bindings/rust/vyre-cuda/examples/common"]

# The C examples' add kernel: add_u32.ptx under the examples' entry name (the
# fake driver runs both names).
EXAMPLE_ADD_ENTRY = "vyre_example_add_u32"
TEST_ADD_ENTRY = "vyre_test_add_u32"

HEADER_NOTE = """ * Generated from tests/kernels/{src}{how} by
 * scripts/sync-test-kernels.py: edit that file and rerun the script (ctest
 * unit.test_kernel_copies fails while this copy differs)."""

VECTOR_ADD_H = """/*
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
{note}
 */
#ifndef VYRE_EXAMPLES_VECTOR_ADD_PTX_H_
#define VYRE_EXAMPLES_VECTOR_ADD_PTX_H_

#define VYRE_EXAMPLE_ADD_ENTRY "vyre_example_add_u32"

/* NUL-terminated, so the program descriptor can leave code_size at 0. */
static const char kVectorAddPtx[] =
{literal};

#endif /* VYRE_EXAMPLES_VECTOR_ADD_PTX_H_ */
"""

SAXPY_H = """/*
 * saxpy_ptx.h — hand-written PTX of the Triton-style saxpy example.
 *
 *   vyre_test_saxpy_f32(float a, const float* x, float* y, u64 n)
 *     y[i] = a * x[i] + y[i] for every i < n
 *
 * The signature Triton emits for such a kernel: scalars by value, pointers,
 * no parameter block. PTX 7.0 for sm_75, JIT-compiled for any newer GPU.
 * (The test suite's fake driver runs a kernel of this name on the host.)
 *
{note}
 */
#ifndef VYRE_EXAMPLES_SAXPY_PTX_H_
#define VYRE_EXAMPLES_SAXPY_PTX_H_

#define SAXPY_ENTRY "vyre_test_saxpy_f32"

/* NUL-terminated, so the program descriptor can leave code_size at 0. */
static const char kSaxpyPtx[] =
{literal};

#endif /* VYRE_EXAMPLES_SAXPY_PTX_H_ */
"""


def read(rel):
    with open(os.path.join(REPO, rel), encoding="utf-8", newline="") as f:
        return f.read()


def c_literal(text):
    """One C string literal per line, indented four spaces, as the examples had them."""
    assert text.endswith("\n")
    lines = []
    for line in text.splitlines(keepends=True):
        body = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        lines.append(f'    "{body}"')
    return "\n".join(lines)


def example_add_ptx(add):
    renamed = add.replace(f".entry {TEST_ADD_ENTRY}(", f".entry {EXAMPLE_ADD_ENTRY}(")
    if renamed == add:
        sys.exit(f"sync-test-kernels: no '.entry {TEST_ADD_ENTRY}(' in {SOURCE}/add_u32.ptx")
    return renamed


def copies():
    """{relative path: expected text} for every copy."""
    out = {}
    for name in KERNELS:
        text = read(f"{SOURCE}/{name}")
        for d in BYTE_COPY_DIRS:
            out[f"{d}/{name}"] = text
    renamed = ",\n * with the entry renamed from vyre_test_add_u32 (the code is the same),"
    out["examples/vector_add_ptx.h"] = VECTOR_ADD_H.format(
        note=HEADER_NOTE.format(src="add_u32.ptx", how=renamed),
        literal=c_literal(example_add_ptx(read(f"{SOURCE}/add_u32.ptx"))))
    out["examples/saxpy_ptx.h"] = SAXPY_H.format(
        note=HEADER_NOTE.format(src="saxpy_f32.ptx", how=""),
        literal=c_literal(read(f"{SOURCE}/saxpy_f32.ptx")))
    return out


# Sources where a kernel must not be written out by hand.
HAND_COPY_ROOTS = ["bindings", "examples"]
HAND_COPY_EXTS = (".go", ".rs", ".py", ".c", ".h", ".ptx")
# A kernel's head: ".entry NAME(" and its parameter list (or its end).
HAND_COPY = re.compile(r"\.entry\s+vyre_(?:test|example)_\w+\s*\(\s*(?:\.param|\))")
SKIP_DIRS = {"target", "__pycache__", ".git", "build"}


def hand_copies(generated):
    found = []
    for root in HAND_COPY_ROOTS:
        for d, dirs, names in os.walk(os.path.join(REPO, root)):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
            for name in names:
                if not name.endswith(HAND_COPY_EXTS):
                    continue
                rel = os.path.relpath(os.path.join(d, name), REPO)
                if rel in generated:
                    continue
                with open(os.path.join(d, name), encoding="utf-8", errors="replace") as f:
                    if HAND_COPY.search(f.read()):
                        found.append(rel)
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    expected = copies()
    if not args.check:
        for rel, text in expected.items():
            path = os.path.join(REPO, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)
        print(f"sync-test-kernels: wrote {len(expected)} copies of {SOURCE}")
        return 0
    problems = []
    for rel, text in sorted(expected.items()):
        try:
            same = read(rel) == text
        except FileNotFoundError:
            problems.append(f"{rel}: missing")
            continue
        if not same:
            problems.append(f"{rel}: differs from what {SOURCE} gives")
    for rel in hand_copies(expected):
        problems.append(f"{rel}: holds a kernel of its own (\".entry vyre_...\"); load "
                        f"{SOURCE} or one of its copies instead")
    if problems:
        print("sync-test-kernels: the test kernels' copies drifted from " + SOURCE + ":",
              file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        print("Fix: edit tests/kernels/*.ptx only, then run scripts/sync-test-kernels.py "
              "and commit the copies it writes.", file=sys.stderr)
        return 1
    print(f"sync-test-kernels: {len(expected)} copies match {SOURCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
