#!/usr/bin/env python3
"""One context per GPU, NCCL over the contexts' resident buffers, ordered with
their dispatches: the Python version of examples/nccl_allreduce.c, with
CuPy's NCCL bindings (cupy.cuda.nccl).

    python3 nccl_allreduce.py [N]      (N u32 elements a GPU, default 1048579)

On every GPU i: a dispatch writes s_i = a_i + b_i; NCCL sums the s_i of all
GPUs into r_i; a dispatch writes out_i = r_i + a_i. Each GPU's work is
enqueued without a host wait: ctx.signal_stream(1) puts the all-reduce on the
device's legacy default stream after the first dispatch, ctx.wait_stream(1)
the second dispatch after it. Every element of every out_i is checked.

Exit codes: 0 = every element matched, or CuPy / its NCCL is not installed
(the example prints SKIPPED and why); 1 = an error or a mismatch; 2 = this
machine cannot run CUDA work, with the library's "Fix:" sentence.
"""

import array
import random
import sys
import time

import vyre_cuda as vc
from _common import ADD_ENTRY, ADD_PTX, U32, check, element_count, main

POISON = 0xA5A5A5A5
LEGACY = 1  # CU_STREAM_LEGACY / cudaStreamLegacy: each device's legacy default stream


def load_nccl():
    """cupy.cuda.nccl, or None with the reason printed."""
    try:
        from cupy.cuda import nccl
        if not nccl.available:
            raise ImportError("cupy.cuda.nccl.available is False")
        return nccl
    except Exception as e:  # ImportError, or CuPy built without NCCL
        print(f"nccl_allreduce: SKIPPED: CuPy with NCCL is not installed here ({e}). "
              "Fix: pip install cupy-cuda13x (its wheels bring NCCL) to run this example.")
        return None


def run():
    n = element_count(1048579)
    gpus = vc.device_count()
    nccl = load_nccl()
    if nccl is None:
        sys.exit(0)  # SKIPPED, said why
    seed = time.time_ns() & 0xFFFFFFFF
    rng = random.Random(seed)
    contexts, adds, bufs, host = [], [], [], []
    try:
        for i in range(gpus):
            ctx = vc.Context(i)
            contexts.append(ctx)
            adds.append(ctx.program(ADD_PTX, ADD_ENTRY,
                                    [vc.Binding("input", name="x"),
                                     vc.Binding("input", name="y"),
                                     vc.Binding("output", name="out")],
                                    workgroup_size=256))
            a = array.array(U32, (rng.randrange(1, 1 << 32) for _ in range(n)))
            b = array.array(U32, (rng.randrange(1, 1 << 32) for _ in range(n)))
            host.append((a, b))
            bufs.append({"a": ctx.upload(a), "b": ctx.upload(b), "s": ctx.alloc(4 * n),
                         "r": ctx.alloc(4 * n), "out": ctx.alloc(4 * n)})
        comms = nccl.NcclCommunicator.initAll(list(range(gpus)))

        pendings = []
        for i in range(gpus):
            g = bufs[i]
            pendings.append(adds[i].dispatch_async([g["a"], g["b"], g["s"]], params=[n]))
            contexts[i].signal_stream(LEGACY)  # the all-reduce after the dispatch
        nccl.groupStart()
        for i in range(gpus):
            comms[i].allReduce(bufs[i]["s"].device_pointer, bufs[i]["r"].device_pointer, n,
                               nccl.NCCL_UINT32, nccl.NCCL_SUM, LEGACY)
        nccl.groupEnd()
        for i in range(gpus):
            g = bufs[i]
            contexts[i].wait_stream(LEGACY)  # the next dispatch after the all-reduce
            pendings.append(adds[i].dispatch_async([g["r"], g["a"], g["out"]], params=[n]))
        for p in pendings:
            p.wait()
            p.close()

        total = [0] * n
        for a, b in host:
            total = [(t + x + y) & 0xFFFFFFFF for t, x, y in zip(total, a, b)]
        for i in range(gpus):
            out = array.array(U32, [POISON]) * n
            bufs[i]["out"].download(out=out)
            a = host[i][0]
            check(f"GPU {i}", out, [(t + x) & 0xFFFFFFFF for t, x in zip(total, a)], seed)
        for comm in comms:
            comm.destroy()
        print(f"nccl_allreduce: {gpus} GPUs, {n} u32 each, every element checked")
    finally:
        for ctx in contexts:
            ctx.close()


if __name__ == "__main__":
    main("nccl_allreduce", run)
