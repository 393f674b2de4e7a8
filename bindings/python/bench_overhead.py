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

--paths both (the default when the compiled module vyre_cuda._fast is in use)
times every vyre row through the compiled fast path and again through the
ctypes path (what VYRE_CUDA_PURE_PYTHON=1 forces), interleaved row by row,
and prints both medians and their difference; --paths compiled or ctypes
times one.

--rows vyre times vyre's own rows only (CuPy and PyTorch are not imported: a
quick process, as scripts/gpu-bindings.sh --bench runs in each round); --rows
libs times CuPy, PyTorch, and vyre over CuPy arrays and torch tensors only.

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
from vyre_cuda import _loader  # noqa: E402

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
    graph = prog.record(resident, params=params)
    dout.upload(bytes(4 * N))
    graph.replay()
    check(dout.download(), "vyre graph replay")
    rows = {
        "vyre resident 4 KiB (dispatch, waits)":
            lambda: prog.dispatch(resident, params=params),
        "vyre host 4 KiB (in, dispatch, out)":
            lambda: prog.dispatch(host, params=params),
        "vyre graph replay 4 KiB (resident, waits)": graph.replay,
        "vyre upload + download 4 KiB": lambda: (da.upload(a), dout.download(out=out)),
    }
    try:
        import numpy as np
    except ImportError:
        np = None
    if np is not None:
        na, nb = np.frombuffer(a, dtype=np.uint32).copy(), np.frombuffer(b, dtype=np.uint32).copy()
        nout = np.zeros(N, dtype=np.uint32)
        prog.dispatch([na, nb, nout], params=params, grid=(1, 1, 1), block=(N, 1, 1))
        check(nout.tobytes(), "vyre numpy")
        rows["vyre numpy 4 KiB (the natural call)"] = (
            lambda: prog.dispatch([na, nb, nout], params=params, grid=(1, 1, 1),
                                  block=(N, 1, 1)))
    device = ctx.device_info()["name"]
    return ctx, prog, rows, device


def cupy_rows(a, b, want, prog=None):
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
    rows = {"cupy resident 4 KiB (add, synchronize)": resident,
            "cupy host 4 KiB (asarray x2, add, get)": host}
    if prog is not None:
        params = [N]
        arrays = [ca, cb, cout]
        cout.fill(0)
        prog.dispatch(arrays, params=params)
        if cout.get().tolist() != want:
            raise SystemExit("vyre over cupy arrays: wrong result")
        rows["vyre over cupy arrays 4 KiB (cached wrap, dispatch)"] = (
            lambda: prog.dispatch(arrays, params=params))
    return rows


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
        rows["vyre over torch tensors 4 KiB (cached wrap, dispatch)"] = (
            lambda: prog.dispatch(tensors, params=params))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--rows", choices=("all", "vyre", "libs"), default="all",
                        help="vyre: vyre_cuda's resident and host rows only (no CuPy or "
                             "PyTorch import); libs: CuPy, PyTorch and vyre over their "
                             "arrays only; all (default): both")
    parser.add_argument("--paths", choices=("both", "compiled", "ctypes"), default=None,
                        help="vyre rows through the compiled fast path, the ctypes path, "
                             "or both interleaved (default: both when the compiled module "
                             "is in use)")
    args = parser.parse_args()
    try:
        compiled = _loader.fast_path()
    except vc.LibraryLoadError as e:
        raise SystemExit(f"bench_overhead: {e}")
    paths = args.paths or ("both" if compiled else "ctypes")
    if paths != "ctypes" and not compiled:
        raise SystemExit(f"bench_overhead: --paths {paths}: the compiled path is not in use "
                         f"({_loader._fast_reason}). Fix: pip install the package (it builds "
                         f"vyre_cuda._fast), or set VYRE_CUDA_EXTENSION_DIR to the build's "
                         f"module directory.")
    fast = _loader._fast
    print(f"vyre_cuda path: {'compiled (vyre_cuda._fast)' if compiled else 'ctypes'}"
          f"{'' if compiled else ' (' + _loader._fast_reason + ')'}; timing: {paths}")

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
    libs = (("cupy", lambda: cupy_rows(a, b, want, prog)),
            ("torch", lambda: torch_rows(a, b, want, prog)))
    for name, build in libs if args.rows != "vyre" else ():
        try:
            rows.update(build())
        except ImportError as e:
            skipped.append(f"{name}: {e}")

    results = {}
    for label, fn in rows.items():
        if not label.startswith("vyre") or paths == "compiled":
            results[label] = measure(fn, args.iterations, args.warmup)
            continue
        if paths == "ctypes":
            _loader._fast = None
            try:
                results[label] = measure(fn, args.iterations, args.warmup)
            finally:
                _loader._fast = fast
            continue
        # Both, interleaved in rounds so drift hits each path alike.
        rounds = 5
        per = max(args.iterations // rounds, 1)
        samples = {"compiled": [], "ctypes": []}
        for _ in range(rounds):
            for path in ("compiled", "ctypes"):
                _loader._fast = fast if path == "compiled" else None
                try:
                    samples[path].append(measure(fn, per, args.warmup // rounds)["median_us"])
                finally:
                    _loader._fast = fast
        r = measure(fn, args.iterations, args.warmup)
        r["compiled_median_us"] = statistics.median(samples["compiled"])
        r["ctypes_median_us"] = statistics.median(samples["ctypes"])
        results[label] = r

    print(f"device: {device}; library: {vc.library_path()}; python {sys.version.split()[0]}")
    print(f"{args.iterations} calls per row after {args.warmup} warm-up calls; microseconds")
    width = max([len(k) for k in results] + [1])
    both = any("ctypes_median_us" in r for r in results.values())
    extra = f"  {'compiled':>8}  {'ctypes':>8}  {'saved':>8}" if both else ""
    print(f"{'':{width}}  {'median':>8}  {'p10':>8}  {'p90':>8}{extra}")
    for label, r in results.items():
        line = f"{label:{width}}  {r['median_us']:8.1f}  {r['p10_us']:8.1f}  {r['p90_us']:8.1f}"
        if "ctypes_median_us" in r:
            line += (f"  {r['compiled_median_us']:8.1f}  {r['ctypes_median_us']:8.1f}  "
                     f"{r['ctypes_median_us'] - r['compiled_median_us']:8.1f}")
        print(line)
    if both:
        print("median/p10/p90: the compiled path (ctypes only where it falls back); compiled/"
              "ctypes: medians of 5 interleaved rounds each; saved: ctypes - compiled")
    for s in skipped:
        print(f"skipped {s}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "library": vc.library_path(), "results": results,
                       "skipped": skipped, "compiled_path": compiled, "paths": paths}, f,
                      indent=2)
    prog.close()
    ctx.close()


if __name__ == "__main__":
    main()
