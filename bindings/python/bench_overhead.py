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

--c-timer PATH (default $VYRE_CUDA_BENCH_TIMER; the build's
bench/libvyre_bench_timer.so) adds C rows timed in this same process, on the
same context, program and buffers: C resident, host and replay through
vyre_dispatch / vyre_graph_replay called from C (bench/inprocess_timer.c).
Every row then also reports its difference to its C partner, round by round
(resident, torch and CuPy rows: C resident; host and numpy: C host; replay:
C replay). Two processes differ by more than Python's overhead (the same C
call measured 10.3 and 12.3 us in two processes on an H200); one process
does not.

Rows run round-robin in --rounds rounds (default 5), each row timing
iterations/rounds calls a round; a row's median is the median of its round
medians, its difference to C the median of the per-round differences.

The library is the installed package's, or VYRE_CUDA_LIBRARY's (e.g.
build/gpu/src/libvyre_cuda.so).
"""

import argparse
import array
import ctypes
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


def timed(fn, iterations, warmup):
    """Samples (us) of `iterations` calls of fn, each timed alone."""
    for _ in range(warmup):
        fn()
    samples = []
    clock = time.perf_counter_ns
    for _ in range(iterations):
        t0 = clock()
        fn()
        samples.append((clock() - t0) / 1000.0)
    return samples


class CRow:
    """A row timed in C (libvyre_bench_timer): block(iterations, warmup)
    gives its samples."""

    def __init__(self, timer, kind, fn, handle, desc, keep=()):
        self._call = getattr(timer, f"vyre_bench_time_{kind}")
        self._call.restype = ctypes.c_int
        self._call.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int,
                               ctypes.POINTER(ctypes.c_double)]
        self._args = (ctypes.cast(fn, ctypes.c_void_p), handle, ctypes.byref(desc))
        self._keep = (desc, keep)  # the descriptor and the arrays it points at

    def block(self, iterations, warmup):
        out = (ctypes.c_double * max(iterations, warmup, 1))()
        for n in (warmup, iterations):
            if n:
                st = self._call(*self._args, n, out)
                if st:
                    raise SystemExit(f"bench_overhead: C row failed with status {st}")
        return list(out[:iterations])


def c_rows(timer_path, prog, graph, resident, host, params):
    """C resident, host and replay rows (the timer at timer_path) over the
    same program, buffers and host memory as the Python rows."""
    from vyre_cuda import _cdefs
    timer = ctypes.CDLL(timer_path)
    lib = _loader._lib
    keep = []

    def desc_of(entries):
        structs = (_cdefs.DispatchBindingStruct * len(entries))()
        for i, e in enumerate(entries):
            b = _cdefs._new(_cdefs.DispatchBindingStruct)
            if isinstance(e, vc.Buffer):
                b.source = _cdefs.Source.RESIDENT
                b.buffer.bits = e._bits
            else:
                c = (ctypes.c_char * len(e)).from_buffer(e)
                keep.append(c)
                b.source = _cdefs.Source.HOST
                b.host_bytes = len(e)
                if prog.bindings[i].role == _cdefs.Role.OUTPUT:
                    b.host_output = ctypes.addressof(c)
                else:
                    b.host_input = ctypes.addressof(c)
            structs[i] = b
        words = (ctypes.c_uint32 * len(params))(*params)
        keep.extend((structs, words))
        return _cdefs._new(_cdefs.DispatchDescStruct, bindings=structs,
                           binding_count=len(entries), param_words=words,
                           param_word_count=len(params), fixpoint_iterations=1)

    return {"C resident 4 KiB (same process)": CRow(timer, "dispatch", lib.vyre_dispatch,
                                                    prog._bits, desc_of(resident), keep),
            "C host 4 KiB (same process)": CRow(timer, "dispatch", lib.vyre_dispatch,
                                                prog._bits, desc_of(host), keep),
            "C graph replay 4 KiB (same process)": CRow(
                timer, "replay", lib.vyre_graph_replay, graph._bits,
                _cdefs._new(_cdefs.GraphReplayDescStruct))}


# The C row each Python row is paired with (by label prefix).
C_PARTNERS = (("vyre resident", "C resident"), ("vyre host", "C host"),
              ("vyre numpy", "C host"), ("vyre graph replay", "C graph replay"),
              ("vyre over", "C resident"), ("cupy resident", "C resident"),
              ("torch resident", "C resident"))


def c_partner(label, labels):
    for prefix, partner in C_PARTNERS:
        if label.startswith(prefix):
            return next((k for k in labels if k.startswith(partner)), None)
    return None


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
    return ctx, prog, graph, rows, device, (resident, host, params)


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
    parser.add_argument("--rounds", type=int, default=5,
                        help="round-robin rounds over the rows (default 5)")
    parser.add_argument("--c-timer", default=os.environ.get("VYRE_CUDA_BENCH_TIMER"),
                        help="libvyre_bench_timer.so: adds C rows timed in this process "
                             "(default $VYRE_CUDA_BENCH_TIMER)")
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
    if args.c_timer and not os.path.exists(args.c_timer):
        raise SystemExit(f"bench_overhead: --c-timer {args.c_timer}: no such file. Fix: build "
                         f"the target vyre_bench_timer (the gpu preset builds it) and pass "
                         f"build/gpu/bench/libvyre_bench_timer.so, or leave --c-timer out.")
    fast = _loader._fast
    print(f"vyre_cuda path: {'compiled (vyre_cuda._fast)' if compiled else 'ctypes'}"
          f"{'' if compiled else ' (' + _loader._fast_reason + ')'}; timing: {paths}")

    a = array.array("I", ((i * 2654435761) & 0x7FFFFFFF for i in range(N)))
    b = array.array("I", ((i * 40503 + 7) & 0x7FFFFFFF for i in range(N)))
    want = [(x + y) & 0xFFFFFFFF for x, y in zip(a, b)]

    try:
        ctx, prog, graph, rows, device, (resident, host, params) = vyre_rows(a, b, want)
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
    if args.c_timer:
        rows = {**c_rows(args.c_timer, prog, graph, resident, host, params), **rows}

    # Round-robin: every row a block of calls a round, so drift over the run
    # hits every row alike. Vyre rows under --paths both time a compiled and a
    # ctypes block a round.
    rounds = max(args.rounds, 1)
    per = max(args.iterations // rounds, 1)
    warm = args.warmup // rounds
    pooled = {label: [] for label in rows}
    medians = {label: [] for label in rows}
    path_medians = {label: {"compiled": [], "ctypes": []} for label in rows}

    def block(fn):
        return fn.block(per, warm) if isinstance(fn, CRow) else timed(fn, per, warm)

    for _ in range(rounds):
        for label, fn in rows.items():
            both = label.startswith("vyre") and paths == "both"
            if paths == "ctypes" and label.startswith("vyre"):
                _loader._fast = None
            try:
                samples = block(fn)
            finally:
                _loader._fast = fast
            pooled[label] += samples
            medians[label].append(statistics.median(samples))
            if both:
                path_medians[label]["compiled"].append(medians[label][-1])
                _loader._fast = None
                try:
                    path_medians[label]["ctypes"].append(statistics.median(block(fn)))
                finally:
                    _loader._fast = fast

    results = {}
    for label in rows:
        samples = sorted(pooled[label])
        r = {"median_us": statistics.median(medians[label]),
             "p10_us": samples[len(samples) // 10],
             "p90_us": samples[(9 * len(samples)) // 10],
             "round_medians_us": medians[label]}
        if path_medians[label]["ctypes"]:
            r["compiled_median_us"] = statistics.median(path_medians[label]["compiled"])
            r["ctypes_median_us"] = statistics.median(path_medians[label]["ctypes"])
        partner = c_partner(label, rows)
        if partner is not None:
            r["c_partner"] = partner
            r["c_same_process_median_us"] = statistics.median(medians[partner])
            r["delta_same_process_us"] = statistics.median(
                [x - y for x, y in zip(medians[label], medians[partner])])
        results[label] = r

    print(f"device: {device}; library: {vc.library_path()}; python {sys.version.split()[0]}")
    print(f"{args.iterations} calls per row in {rounds} round-robin rounds, after "
          f"{args.warmup} warm-up calls; microseconds")
    width = max([len(k) for k in results] + [1])
    both = any("ctypes_median_us" in r for r in results.values())
    paired = any("delta_same_process_us" in r for r in results.values())
    extra = f"  {'compiled':>8}  {'ctypes':>8}  {'saved':>8}" if both else ""
    extra += f"  {'vs C':>8}" if paired else ""
    print(f"{'':{width}}  {'median':>8}  {'p10':>8}  {'p90':>8}{extra}")
    for label, r in results.items():
        line = f"{label:{width}}  {r['median_us']:8.1f}  {r['p10_us']:8.1f}  {r['p90_us']:8.1f}"
        if both:
            line += (f"  {r['compiled_median_us']:8.1f}  {r['ctypes_median_us']:8.1f}  "
                     f"{r['ctypes_median_us'] - r['compiled_median_us']:8.1f}"
                     if "ctypes_median_us" in r else " " * 30)
        if "delta_same_process_us" in r:
            line += f"  {r['delta_same_process_us']:+8.2f}"
        print(line)
    if both:
        print("median/p10/p90: the compiled path (ctypes only where it falls back); compiled/"
              "ctypes: medians of the rounds each; saved: ctypes - compiled")
    if paired:
        print("vs C: the median over the rounds of (the row's round median minus its C "
              "partner's, same process)")
    for s_ in skipped:
        print(f"skipped {s_}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "library": vc.library_path(), "results": results,
                       "skipped": skipped, "compiled_path": compiled, "paths": paths,
                       "rounds": rounds}, f, indent=2)
    graph.close()
    prog.close()
    ctx.close()


if __name__ == "__main__":
    main()
