#!/usr/bin/env python3
"""A Triton-style kernel, whose parameters are scalars and pointers in the
kernel's own order, bound through an explicit parameter list instead of the
default convention (one pointer per binding, then the parameter words): the
Python version of examples/triton_saxpy.c.

    python3 triton_saxpy.py [N]        (N elements, default 1000003)

The kernel is vyre_test_saxpy_f32(float a, const float* x, float* y, u64 n):
y[i] = a * x[i] + y[i]. Its parameters are bound as
[(SCALAR32, 0), (BINDING, 0), (BINDING, 1), (SCALAR64, 1)]: scalars[0] = a
(a Python float, packed as float32 because its slot is SCALAR32), binding 0 =
x, binding 1 = y, scalars[1] = n. A Triton kernel with unused scratch
pointers would add (ParamKind.NULL_POINTER, 0) entries.

Two runs over random non-zero data (integers 1..4096, so a * x + y is exact
in float32 with or without an FMA and must match the CPU bit for bit):
  1. x and y in page-locked host memory (Context.pinned), copied by DMA in
     place; an asynchronous dispatch with device timing reads y from one
     pinned buffer and writes the result to another, poisoned with NaN
     (vc.InOut(y_in, y_out): the input is left as it was, and checked).
  2. x and y uploaded to resident buffers, a synchronous dispatch, y
     downloaded into an array poisoned with NaN.

Exit codes: 0 = every element matched; 1 = an error or a mismatch; 2 = this
machine cannot run CUDA work (no driver, driver too old, or no device), with
the library's message and its "Fix:" sentence.
"""

import array
import random
import time

import vyre_cuda as vc
from _common import SAXPY_ENTRY, SAXPY_PTX, check, element_count, main

A = 2.5


def random_floats(rng, n):
    return array.array("f", (float(rng.randrange(1, 4097)) for _ in range(n)))


def saxpy_reference(x, y0):
    return array.array("f", (A * xi + yi for xi, yi in zip(x, y0)))


def run():
    n = element_count(1000003)  # not a multiple of the block size
    seed = time.time_ns() & 0xFFFFFFFF
    rng = random.Random(seed)

    with vc.Context(0) as ctx:
        saxpy = ctx.program(
            SAXPY_PTX, SAXPY_ENTRY,
            [vc.Binding("input", element_size=4, name="x"),
             vc.Binding("input_output", element_size=4, name="y")],
            workgroup_size=128,
            params=[(vc.ParamKind.SCALAR32, 0),   # float a  = scalars[0]
                    (vc.ParamKind.BINDING, 0),    # const float* x = binding 0
                    (vc.ParamKind.BINDING, 1),    # float* y = binding 1
                    (vc.ParamKind.SCALAR64, 1)])  # u64 n = scalars[1]

        # 1. Page-locked host memory, asynchronously: y read from y_in, the
        #    result written to y_out (InOut), y_in untouched. The grid is
        #    derived from the bindings' n elements.
        x_pinned, y_in_pinned, y_out_pinned = (ctx.pinned(4 * n), ctx.pinned(4 * n),
                                               ctx.pinned(4 * n))
        x, y_in = x_pinned.view.cast("f"), y_in_pinned.view.cast("f")
        y_out = y_out_pinned.view.cast("f")
        x[:] = random_floats(rng, n)
        y0 = random_floats(rng, n)
        y_in[:] = y0
        y_out[:] = array.array("f", [float("nan")]) * n  # an unwritten element cannot pass
        pending = saxpy.dispatch_async([x_pinned, vc.InOut(y_in_pinned, y_out_pinned)],
                                       scalars=[A, n], flags=vc.DISPATCH_FLAG_DEVICE_TIMING)
        timing = pending.wait().timing
        pending.close()
        check("pinned host memory", y_out, saxpy_reference(x, y0), seed)
        check("pinned input left as it was", y_in, y0, seed)
        print("triton_saxpy: saxpy over %d floats: %.1f us on the device, %.1f us wall"
              % (n, timing["device_ns"] / 1e3, timing["wall_ns"] / 1e3))
        del x, y_in, y_out  # views of the pinned memory: gone before it is freed
        x_pinned.close()
        y_in_pinned.close()
        y_out_pinned.close()

        # 2. Resident buffers, synchronously, y downloaded into a poisoned array.
        x, y0 = random_floats(rng, n), random_floats(rng, n)
        dx, dy = ctx.upload(x), ctx.upload(y0)
        saxpy.dispatch([dx, dy], scalars=[A, n])
        y = array.array("f", [float("nan")]) * n  # an unwritten element cannot pass
        dy.download(out=y)
        check("resident buffers", y, saxpy_reference(x, y0), seed)


if __name__ == "__main__":
    main("triton_saxpy", run)
