#!/usr/bin/env python3
"""Vector add, from host memory and from resident buffers, checked element by
element against the CPU: the Python version of examples/vector_add.c.

    python3 vector_add.py [N]          (N elements, default 1000003)

Random non-zero u32 data; out = a + b (mod 2**32). The host run passes the
inputs as array.array and a poisoned output array that the dispatch fills;
the resident run uploads once, dispatches asynchronously with device timing
and downloads into a poisoned array. numpy is not needed (numpy arrays work
as host data too).

Needs the vyre_cuda package importable (pip install ./bindings/python, or
PYTHONPATH=bindings/python with VYRE_CUDA_LIBRARY naming libvyre_cuda.so).
Exit codes: 0 = every element matched; 1 = an error or a mismatch; 2 = this
machine cannot run CUDA work (no driver, driver too old, or no device), with
the library's message and its "Fix:" sentence.
"""

import array
import random
import time

import vyre_cuda as vc
from _common import ADD_ENTRY, ADD_PTX, U32, check, element_count, main

POISON = 0xA5A5A5A5  # so an unwritten element cannot pass


def run():
    n = element_count(1000003)  # not a multiple of the block size

    # A context on device 0: where the driver is loaded, so a machine without
    # CUDA fails here with NO_DRIVER / NO_DEVICE.
    with vc.Context(0) as ctx:
        info = ctx.device_info()
        print("vector_add: device 0: %s (sm_%d%d)" % ((info["name"],) + info["compute_capability"]))

        seed = time.time_ns() & 0xFFFFFFFF
        rng = random.Random(seed)
        a = array.array(U32, (rng.randrange(1, 1 << 32) for _ in range(n)))
        b = array.array(U32, (rng.randrange(1, 1 << 32) for _ in range(n)))
        expected = array.array(U32, ((x + y) & 0xFFFFFFFF for x, y in zip(a, b)))

        # The default calling convention: one pointer per binding, then the
        # u32 parameter words (params[0] = n).
        add = ctx.program(ADD_PTX, ADD_ENTRY,
                          [vc.Binding("input", name="a"), vc.Binding("input", name="b"),
                           vc.Binding("output", name="out")],
                          workgroup_size=256)

        # Host memory: staged in, run, read back, in one call. The output is
        # written into the array passed (returned as outputs[2]).
        out = array.array(U32, [POISON]) * n
        outputs = add.dispatch([a, b, out], params=[n])
        check("host memory", outputs[2], expected, seed)
        print("vector_add: host:     %d elements in %.1f us wall"
              % (n, outputs.timing["wall_ns"] / 1e3))

        # Resident buffers: upload once, dispatch asynchronously, wait,
        # download.
        da, db, dout = ctx.upload(a), ctx.upload(b), ctx.alloc(4 * n)
        pending = add.dispatch_async([da, db, dout], params=[n],
                                     flags=vc.DISPATCH_FLAG_DEVICE_TIMING)
        timing = pending.wait().timing
        pending.close()  # a waited Pending is released once (or by the collector)
        out = array.array(U32, [POISON]) * n
        dout.download(out=out)
        check("resident buffers", out, expected, seed)
        print("vector_add: resident: %d elements, %.1f us on the device, %.1f us wall"
              % (n, timing["device_ns"] / 1e3, timing["wall_ns"] / 1e3))

        t = ctx.telemetry()
        print("vector_add: telemetry: %d dispatches, %d kernel launches, %d bytes up, "
              "%d bytes down" % (t["dispatches"], t["kernel_launches"], t["h2d_bytes"],
                                 t["d2h_bytes"]))


if __name__ == "__main__":
    main("vector_add", run)
