#!/usr/bin/env python3
"""Per-call overhead of a 4 KiB vector add (1024 u32) from Python: vyre_cuda
over resident buffers and over host memory, next to CuPy and PyTorch doing
the same work (each skipped when not importable). Not a test.

Each row times one complete call, result ready: resident rows end with the
device work finished (vyre's dispatch waits; CuPy and PyTorch synchronise),
host rows copy both inputs in and the sum out. Medians (and p10/p90) of
--iterations calls after --warmup calls, in microseconds.

    python3 bindings/python/bench_overhead.py [--iterations 5000] [--json out.json]
                                              [--rows all|vyre|libs]

--rows vyre times vyre's own rows only (CuPy and PyTorch are not imported: a
quick process, as scripts/gpu-bindings.sh --bench runs in each round); --rows
libs times CuPy, PyTorch and vyre over torch tensors only.

The library is the installed package's, or VYRE_CUDA_LIBRARY's (e.g.
build/gpu/src/libvyre_cuda.so).
"""

import argparse
import array
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vyre_cuda as vc  # noqa: E402

N = 1024  # u32 elements: 4 KiB per operand

# The contract's test kernel (its name lets the fake driver run it, for a smoke
# run): tests/kernels/add_u32.ptx, the one source the bindings share.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                       "kernels", "add_u32.ptx"), encoding="utf-8", newline="") as _f:
    ADD_PTX = _f.read()


def measure(fn, iterations, warmup):
    for _ in range(warmup):
        fn()
    samples = []
    clock = time.perf_counter_ns
    for _ in range(iterations):
        t0 = clock()
        fn()
        samples.append((clock() - t0) / 1000.0)
    samples.sort()
    return {"median_us": statistics.median(samples),
            "p10_us": samples[len(samples) // 10],
            "p90_us": samples[(9 * len(samples)) // 10]}


def vyre_rows(a, b, want):
    ctx = vc.Context()
    prog = ctx.program(ADD_PTX, "vyre_test_add_u32",
                       [vc.Binding("input"), vc.Binding("input"), vc.Binding("output")],
                       workgroup_size=256)
    da, db, dout = ctx.upload(a), ctx.upload(b), ctx.alloc(4 * N)
    out = bytearray(4 * N)
    params = [N]
    resident = [da, db, dout]
    host = [a, b, out]

    def check(data, label):
        got = array.array("I", bytes(data))
        bad = sum(1 for x, y in zip(got, want) if x != y)
        if bad or len(got) != N:
            raise SystemExit(f"{label}: {bad} wrong elements")

    prog.dispatch(resident, params=params)
    check(dout.download(), "vyre resident")
    prog.dispatch(host, params=params)
    check(out, "vyre host")
    rows = {
        "vyre resident 4 KiB (dispatch, waits)":
            lambda: prog.dispatch(resident, params=params),
        "vyre host 4 KiB (in, dispatch, out)":
            lambda: prog.dispatch(host, params=params),
    }
    device = ctx.device_info()["name"]
    return ctx, prog, rows, device


def cupy_rows(a, b, want):
    import cupy as cp
    import numpy as np
    na, nb = np.frombuffer(a, dtype=np.uint32), np.frombuffer(b, dtype=np.uint32)
    ca, cb = cp.asarray(na), cp.asarray(nb)
    cout = cp.empty_like(ca)
    stream = cp.cuda.get_current_stream()

    def resident():
        cp.add(ca, cb, out=cout)
        stream.synchronize()

    def host():
        return (cp.asarray(na) + cp.asarray(nb)).get()

    if host().tolist() != want:
        raise SystemExit("cupy host: wrong result")
    return {"cupy resident 4 KiB (add, synchronize)": resident,
            "cupy host 4 KiB (asarray x2, add, get)": host}


def torch_rows(a, b, want, prog=None):
    import torch
    if not torch.cuda.is_available():
        raise ImportError("torch.cuda.is_available() is False")
    ta = torch.tensor(list(a), dtype=torch.int64).to(torch.int32)
    tb = torch.tensor(list(b), dtype=torch.int64).to(torch.int32)
    da, db = ta.cuda(), tb.cuda()
    dout = torch.empty_like(da)

    def resident():
        torch.add(da, db, out=dout)
        torch.cuda.synchronize()

    def host():
        return (ta.cuda(non_blocking=False) + tb.cuda(non_blocking=False)).cpu()

    got = [v & 0xFFFFFFFF for v in host().tolist()]
    if got != want:
        raise SystemExit("torch host: wrong result")
    rows = {"torch resident 4 KiB (add, synchronize)": resident,
            "torch host 4 KiB (.cuda() x2, add, .cpu())": host}
    if prog is not None:
        params = [N]
        tensors = [da, db, dout]
        prog.dispatch(tensors, params=params)
        got = [v & 0xFFFFFFFF for v in dout.tolist()]
        if got != want:
            raise SystemExit("vyre over torch tensors: wrong result")
        rows["vyre over torch tensors 4 KiB (DLPack wrap, dispatch)"] = (
            lambda: prog.dispatch(tensors, params=params))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--rows", choices=("all", "vyre", "libs"), default="all",
                        help="vyre: vyre_cuda's resident and host rows only (no CuPy or "
                             "PyTorch import); libs: CuPy, PyTorch and vyre over torch "
                             "tensors only; all (default): both")
    args = parser.parse_args()

    a = array.array("I", ((i * 2654435761) & 0x7FFFFFFF for i in range(N)))
    b = array.array("I", ((i * 40503 + 7) & 0x7FFFFFFF for i in range(N)))
    want = [(x + y) & 0xFFFFFFFF for x, y in zip(a, b)]

    try:
        ctx, prog, rows, device = vyre_rows(a, b, want)
    except vc.VyreError as e:
        raise SystemExit(f"bench_overhead: no GPU for vyre: {e}")
    if args.rows == "libs":
        rows = {}
    skipped = []
    libs = (("cupy", lambda: cupy_rows(a, b, want)),
            ("torch", lambda: torch_rows(a, b, want, prog)))
    for name, build in libs if args.rows != "vyre" else ():
        try:
            rows.update(build())
        except ImportError as e:
            skipped.append(f"{name}: {e}")

    results = {}
    for label, fn in rows.items():
        results[label] = measure(fn, args.iterations, args.warmup)

    print(f"device: {device}; library: {vc.library_path()}; python {sys.version.split()[0]}")
    print(f"{args.iterations} calls per row after {args.warmup} warm-up calls; microseconds")
    width = max([len(k) for k in results] + [1])
    print(f"{'':{width}}  {'median':>8}  {'p10':>8}  {'p90':>8}")
    for label, r in results.items():
        print(f"{label:{width}}  {r['median_us']:8.1f}  {r['p10_us']:8.1f}  {r['p90_us']:8.1f}")
    for s in skipped:
        print(f"skipped {s}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "library": vc.library_path(), "results": results,
                       "skipped": skipped}, f, indent=2)
    prog.close()
    ctx.close()


if __name__ == "__main__":
    main()
