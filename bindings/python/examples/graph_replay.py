#!/usr/bin/env python3
"""Record once, replay many times: the Python version of examples/graph_replay.c.

    python3 graph_replay.py [N]        (N elements, default 100003)

1. A vector add over host memory recorded as a graph (Program.record: the
   arrays are sample data that fix the byte lengths; nothing runs), replayed
   with new random data three times and once more with the same data (the
   replay that skips the input copies), every element checked each time.
2. The same add over resident buffers, replayed with no arguments (one
   launch), then rebound to another output buffer at replay (no new capture).
3. A sequence (upload, two dispatches, download) recorded as one graph and
   replayed with new host input between replays, then run eagerly.

Random non-zero u32 data; outputs are poisoned before every replay. Exit
codes: 0 = every element matched; 1 = an error or a mismatch; 2 = this
machine cannot run CUDA work (no driver, driver too old, or no device), with
the library's message and its "Fix:" sentence.
"""

import array
import random
import time

import vyre_cuda as vc
from _common import ADD_ENTRY, ADD_PTX, U32, check, element_count, main

POISON = 0xA5A5A5A5  # so an unwritten element cannot pass
MASK = 0xFFFFFFFF


def run():
    n = element_count(100003)  # not a multiple of the block size
    seed = time.time_ns() & MASK
    rng = random.Random(seed)

    def fill_random(v):
        """New random non-zero data, in place (recorded arrays keep their size)."""
        v[:] = array.array(U32, (rng.randrange(1, 1 << 32) for _ in range(n)))

    def poison(v):
        v[:] = array.array(U32, [POISON]) * n

    def expected(a, b, b_times=1):
        return array.array(U32, ((x + b_times * y) & MASK for x, y in zip(a, b)))

    with vc.Context(0) as ctx:  # NO_DRIVER / NO_DEVICE here on a machine without CUDA
        a, b = array.array(U32, [0]) * n, array.array(U32, [0]) * n
        out = array.array(U32, [0]) * n
        fill_random(a)
        fill_random(b)

        # out[i] = a[i] + b[i], i < params[0]; out is OUTPUT, zeroed before each launch.
        add = ctx.program(ADD_PTX, ADD_ENTRY,
                          [vc.Binding("input", name="a"), vc.Binding("input", name="b"),
                           vc.Binding("output", name="out")],
                          workgroup_size=256)

        # 1. Host memory: record with sample data, replay with this replay's data.
        with add.record([a, b, out], params=[n]) as graph:
            info = graph.info()
            print("graph_replay: host graph: %d nodes (%d without the input copies)"
                  % (info["node_count"], info["unchanged_input_node_count"]))
            for _ in range(3):
                fill_random(a)
                fill_random(b)
                poison(out)
                result = graph.replay([a, b, out])[2]  # `out`, written in place
                check("host graph replay", result, expected(a, b), seed)
            # The same inputs again: found equal to what the device holds, so
            # the graph runs without the input copies.
            poison(out)
            before = ctx.telemetry()["graph_uploads_skipped"]
            graph.replay([a, b, out])
            skipped = ctx.telemetry()["graph_uploads_skipped"] > before
            check("host graph replay, unchanged inputs", out, expected(a, b), seed)
            print("graph_replay: 4 host replays checked; the last one skipped the input "
                  "upload: %s" % ("yes" if skipped else "no"))

        # 2. Resident buffers: replay with no arguments, then rebind the output.
        da, db = ctx.upload(a), ctx.upload(b)
        dc, dd = ctx.alloc(4 * n), ctx.alloc(4 * n)
        with add.record([da, db, dc], params=[n]) as resident:
            resident.replay()  # all bindings resident: one graph launch
            poison(out)
            dc.download(out=out)
            check("resident graph replay", out, expected(a, b), seed)
            # Each rebound range must be at least as large as the one recorded;
            # later replays with no arguments keep the new binding.
            resident.replay([da, db, dd])
            poison(out)
            dd.download(out=out)
            check("resident graph replay, output rebound", out, expected(a, b), seed)
        print("graph_replay: resident graph replayed, then rebound to another output buffer")

        # 3. A sequence: upload a into da, c = a + b, d = c + b, download d.
        #    UploadStep reads `a` in place when each run or replay starts and
        #    DownloadStep writes `out` when it ends, so new contents of `a`
        #    between replays are picked up without recording again.
        seq = ctx.sequence([vc.UploadStep(da, a),
                            vc.DispatchStep(add, [da, db, dc], params=[n]),
                            vc.DispatchStep(add, [dc, db, dd], params=[n]),
                            vc.DownloadStep(dd, out)])
        with seq, seq.record() as seq_graph:
            info = seq_graph.info()
            for _ in range(2):
                fill_random(a)
                poison(out)
                result = seq_graph.replay()[0]  # the DownloadStep's `out`
                check("sequence graph replay", result, expected(a, b, 2), seed)
            # The same steps run eagerly give the same result.
            poison(out)
            seq.run()
            check("sequence run", out, expected(a, b, 2), seed)
        print("graph_replay: sequence of 4 steps recorded as one graph of %d nodes "
              "(%d kernels)" % (info["node_count"], info["kernel_node_count"]))

        t = ctx.telemetry()
        print("graph_replay: telemetry: %d graph replays, %d graph launches, %d uploads skipped"
              % (t["graph_replays"], t["graph_launches"], t["graph_uploads_skipped"]))


if __name__ == "__main__":
    main("graph_replay", run)
