"""Buffers shared between processes (Buffer.export_ipc, Context.import_ipc,
Buffer.imported, info()["imported"]), with this binding on both sides: the
other process is a fresh interpreter running CHILD below (the same
environment and package), which takes commands on stdin and answers on
stdout, one line each:

    import <hex> <bytes> <expect seed> <write seed>
        imports the handle, checks its flags and every byte against
        seeded(bytes, expect seed), checks that the import cannot be exported
        again, writes seeded(bytes, write seed) into it and closes it:
        "ipc-child ok <bytes>"
    export <bytes> <seed>   a buffer of seeded(bytes, seed), exported:
                            "ipc-child ok <hex>" (the buffer is kept)
    expect <seed>           compares that buffer with seeded(bytes, seed):
                            "ipc-child ok"
    free                    closes it: "ipc-child ok"
    exit                    closes its context and exits 0

A failed check raises in the child, which exits non-zero without answering;
the parent, reading end of file instead of an answer, fails with the child's
stderr. On the fake driver exported memory is shared through POSIX shared
memory, on a GPU through CUDA. Every byte is random (fresh seeds each run),
none zero."""

import os
import random
import subprocess
import sys
import tempfile
import textwrap
import unittest

import vyre_cuda as vc

from test_vyre_cuda import FAKE_DRIVER, fake_stats, gpu_context

CHILD = textwrap.dedent("""\
    import random
    import sys

    import vyre_cuda as vc


    def seeded(n, seed):
        return bytes(b or 0x5A for b in random.Random(seed).randbytes(n))


    def same(got, want, label):
        got = bytes(got)
        assert len(got) == len(want), f"{label}: {len(got)} bytes, expected {len(want)}"
        if got != want:
            i = next(i for i in range(len(want)) if got[i] != want[i])
            raise AssertionError(f"{label}: byte {i} is {got[i]:#04x}, expected {want[i]:#04x}")


    def answer(text=""):
        print(("ipc-child ok " + text).rstrip(), flush=True)


    ctx = vc.Context()
    exported = None
    for line in sys.stdin:
        words = line.split()
        if words[0] == "import":
            handle = bytes.fromhex(words[1])
            n, expect_seed, write_seed = (int(w) for w in words[2:5])
            buf = ctx.import_ipc(handle)
            info = buf.info()
            assert buf.imported and buf.borrowed and buf.nbytes == n, (buf.nbytes, n)
            assert info["imported"] and info["borrowed"] and info["bytes"] == n, info
            assert info["flags"] == vc.BUFFER_INFO_FLAG_BORROWED | vc.BUFFER_INFO_FLAG_IMPORTED
            same(buf.download(), seeded(n, expect_seed), "the child's import")
            try:
                buf.export_ipc()
                raise AssertionError("export_ipc of an import was not refused")
            except vc.VyreError as e:
                assert e.status == vc.Status.INVALID_ARGUMENT, e
                assert "Fix:" in e.message and "an import of memory another process" in e.message, e
            buf.upload(seeded(n, write_seed))
            buf.close()
            answer(str(n))
        elif words[0] == "export":
            n, seed = int(words[1]), int(words[2])
            exported = ctx.upload(seeded(n, seed))
            answer(exported.export_ipc().hex())
        elif words[0] == "expect":
            same(exported.download(), seeded(exported.nbytes, int(words[1])),
                 "the child's exported buffer")
            answer()
        elif words[0] == "free":
            exported.close()
            answer()
        elif words[0] == "exit":
            break
        else:
            raise AssertionError(f"the child got {line!r}")
    if exported is not None:
        exported.close()
    ctx.close()
""")


def seeded(n, seed):
    """n pseudo-random bytes from seed, none zero (CHILD has the same)."""
    return bytes(b or 0x5A for b in random.Random(seed).randbytes(n))


def fresh_seed():
    return int.from_bytes(os.urandom(8), "little")


class Peer:
    """A fresh interpreter running CHILD."""

    def __init__(self, test):
        self.test = test
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in [os.path.dirname(os.path.dirname(vc.__file__)),
                        env.get("PYTHONPATH", "")] if p)
        flags = ["-X", "dev"] if sys.flags.dev_mode else []
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, *flags, "-c", CHILD], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True)
        test.addCleanup(self._cleanup)

    def _child_stderr(self):
        self.stderr.seek(0)
        return self.stderr.read()

    def ask(self, command):
        """Sends one command; returns what follows "ipc-child ok"."""
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it ended: reported below
        line = self.proc.stdout.readline()
        if not line.startswith("ipc-child ok"):
            self.proc.kill()
            self.proc.wait()
            self.test.fail(f"the child answered {line!r} to {command.split()[0]!r} "
                           f"(exit {self.proc.returncode}); its stderr:\n{self._child_stderr()}")
        return line[len("ipc-child ok"):].strip()

    def finish(self):
        """Sends "exit" and checks that the child exited 0."""
        self.proc.stdin.write("exit\n")
        self.proc.stdin.close()
        rest = self.proc.stdout.read()
        code = self.proc.wait(timeout=120)
        self.test.assertEqual(code, 0, f"the child failed; its output:\n{rest}\n"
                                       f"its stderr:\n{self._child_stderr()}")

    def _cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.stderr):
            if f is not None and not f.closed:
                f.close()


class IpcTest(unittest.TestCase):
    def setUp(self):
        self.ctx = gpu_context()

    def tearDown(self):
        self.ctx.close()
        if FAKE_DRIVER:
            self.assertEqual(fake_stats().misuse_errors, 0,
                             "the engine misused the (fake) driver API; its stderr shows each call")

    def assertSame(self, got, want, label):
        got = bytes(got)
        self.assertEqual(len(got), len(want), f"{label}: length")
        if got != want:
            bad = [i for i in range(len(want)) if got[i] != want[i]]
            self.fail(f"{label}: {len(bad)} of {len(want)} bytes wrong; first byte {bad[0]} is "
                      f"{got[bad[0]]:#04x}, expected {want[bad[0]]:#04x}")

    def assertRefused(self, call, needle, status=vc.Status.INVALID_ARGUMENT):
        with self.assertRaises(vc.VyreError) as e:
            call()
        self.assertEqual(e.exception.status, status, e.exception)
        first_line = e.exception.message.split("\n")[0]
        self.assertIn("Fix:", first_line)
        self.assertIn(needle, first_line)
        return e.exception

    def _child_imports(self, n):
        seed, write_seed = fresh_seed(), fresh_seed()
        owner = self.ctx.upload(seeded(n, seed))
        self.assertFalse(owner.imported or owner.borrowed)
        info = owner.info()
        self.assertFalse(info["imported"] or info["borrowed"], info)
        self.assertEqual(info["flags"], 0)
        handle = owner.export_ipc()
        self.assertIsInstance(handle, bytes)
        self.assertEqual(len(handle), vc.IPC_HANDLE_BYTES)
        self.assertEqual(owner.export_ipc(), handle, "one buffer, two handles")
        peer = Peer(self)
        self.assertEqual(peer.ask(f"import {handle.hex()} {n} {seed} {write_seed}"), str(n))
        peer.finish()
        self.assertSame(owner.download(), seeded(n, write_seed),
                        "the exporter's buffer after the child wrote through its import")
        owner.close()

    def test_child_imports_our_export_and_writes_back(self):
        self._child_imports(4096)
        self._child_imports(100003)  # not a multiple of anything

    def test_we_import_the_child_export_once_mapped_twice_held(self):
        for n in (4096, 70001):
            seed, write_seed = fresh_seed(), fresh_seed()
            peer = Peer(self)
            handle = bytes.fromhex(peer.ask(f"export {n} {seed}"))
            first = self.ctx.import_ipc(handle)
            second = self.ctx.import_ipc(bytearray(handle))  # any bytes-like object
            self.assertTrue(first.imported and first.borrowed)
            self.assertEqual(first.nbytes, n)
            info1, info2 = first.info(), second.info()
            self.assertEqual(info1["flags"],
                             vc.BUFFER_INFO_FLAG_BORROWED | vc.BUFFER_INFO_FLAG_IMPORTED)
            self.assertTrue(info1["imported"] and info1["borrowed"])
            self.assertEqual(info1["bytes"], n)
            self.assertEqual(info1["device_pointer"], info2["device_pointer"],
                             "one handle, one mapping")
            self.assertSame(first.download(), seeded(n, seed), "our import")

            # An import is not this process's to export.
            self.assertRefused(first.export_ipc, "an import of memory another process exported")

            # A device copy out of the mapping.
            local = self.ctx.alloc(n)
            second.copy_to(local)
            self.assertSame(local.download(), seeded(n, seed), "a copy out of our import")
            local.close()

            # Closing one import leaves the other's mapping working; the child
            # reads what we wrote.
            first.close()
            second.upload(seeded(n, write_seed))
            peer.ask(f"expect {write_seed}")

            # An import in a second context, closed with it: the child's
            # memory stays.
            other = vc.Context(self.ctx.device)
            third = other.import_ipc(memoryview(handle))
            self.assertTrue(third.imported)
            other.close()
            third.close()
            second.close()
            peer.ask(f"expect {write_seed}")
            peer.ask("free")
            peer.finish()

    def test_import_after_the_exporter_freed_or_exited_is_refused(self):
        for exits in (False, True):
            with self.subTest(exits=exits):
                peer = Peer(self)
                handle = bytes.fromhex(peer.ask(f"export 4096 {fresh_seed()}"))
                if exits:
                    peer.finish()
                else:
                    peer.ask("free")
                # The message's wording is the library's; its status and Fix
                # are the contract.
                e = self.assertRefused(lambda: self.ctx.import_ipc(handle), "")
                self.assertEqual(e.call, "vyre_buffer_import_ipc")
                if not exits:
                    peer.finish()

    def test_refusals_in_one_process(self):
        buf = self.ctx.upload(seeded(4096, fresh_seed()))
        handle = buf.export_ipc()

        # CUDA does not open a handle in the process that exported it.
        self.assertRefused(lambda: self.ctx.import_ipc(handle), "exported by this process")

        # Bytes that are not a handle.
        corrupted = bytearray(handle)
        corrupted[40] ^= 0x10
        self.assertRefused(lambda: self.ctx.import_ipc(bytes(corrupted)),
                           "checksum does not match")
        self.assertRefused(lambda: self.ctx.import_ipc(bytes(vc.IPC_HANDLE_BYTES)),
                           "no handle marker")

        # Python's own refusals, before the library sees the handle.
        for n in (0, 1, vc.IPC_HANDLE_BYTES - 1, vc.IPC_HANDLE_BYTES + 1):
            with self.assertRaises(ValueError) as e:
                self.ctx.import_ipc(bytes(n))
            self.assertIn(f"not {n}", str(e.exception))
            self.assertIn("Fix:", str(e.exception))
        for wrong in (handle.hex(), None, 7, list(handle)):
            with self.assertRaises(TypeError) as e:
                self.ctx.import_ipc(wrong)
            self.assertIn("Fix:", str(e.exception))
        with self.assertRaises(TypeError) as e:
            self.ctx.import_ipc(handle.hex())
        self.assertIn("bytes.fromhex", str(e.exception))

        # Closed objects.
        buf.close()
        with self.assertRaises(vc.VyreError) as e:
            buf.export_ipc()
        self.assertIn(e.exception.status, (vc.Status.INVALID_HANDLE, vc.Status.STALE_HANDLE))
        other = vc.Context(self.ctx.device)
        other.close()
        with self.assertRaises(vc.VyreError) as e:
            other.import_ipc(handle)
        self.assertIn(e.exception.status, (vc.Status.INVALID_HANDLE, vc.Status.STALE_HANDLE))


if __name__ == "__main__":
    unittest.main()
