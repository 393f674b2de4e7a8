"""Buffer.copy_to / copy_to_async and device_can_access_peer (issue 22): on
the test suite's fake driver, one device and, where the fake has two
(FAKE_CUDA_DEVICES=2), across devices, peer and staged; every byte of a
poisoned destination checked."""

import os
import random
import unittest

import vyre_cuda as vc

from test_vyre_cuda import gpu_context

POISON = b"\xa5"


def _data(rng, n):
    return bytes(rng.randrange(1, 256) for _ in range(n))


class BufferCopyTest(unittest.TestCase):
    def setUp(self):
        self.ctx = gpu_context()
        self.rng = random.Random(int.from_bytes(os.urandom(4), "little"))

    def tearDown(self):
        self.ctx.close()

    def test_copy_within_one_context(self):
        n = 4099  # not a multiple of any word size
        data = _data(self.rng, n)
        src = self.ctx.upload(data)
        dst = self.ctx.upload(POISON * (n + 64))
        src.copy_to(dst, n - 3, src_offset=3, dst_offset=17)
        got = dst.download()
        self.assertEqual(got[:17], POISON * 17)
        self.assertEqual(got[17:17 + n - 3], data[3:])
        self.assertEqual(got[17 + n - 3:], POISON * (n + 64 - 17 - (n - 3)))

    def test_default_length_is_what_both_ranges_hold(self):
        data = _data(self.rng, 1000)
        src = self.ctx.upload(data)
        dst = self.ctx.upload(POISON * 600)
        src.copy_to(dst, src_offset=100)
        self.assertEqual(dst.download(), data[100:700])

    def test_copy_between_two_contexts_async(self):
        other = vc.Context(self.ctx.device)
        try:
            data = _data(self.rng, 1 << 16)
            src = self.ctx.upload(data)
            dst = other.upload(POISON * len(data))
            pending = src.copy_to_async(dst)
            pending.wait()
            pending.close()
            self.assertEqual(dst.download(), data)
        finally:
            other.close()

    def test_refusals_name_the_fix(self):
        src = self.ctx.upload(_data(self.rng, 256))
        dst = self.ctx.alloc(128)
        with self.assertRaises(vc.VyreError) as e:
            src.copy_to(dst, 200)  # past dst
        self.assertEqual(e.exception.status, vc.Status.OUT_OF_RANGE)
        self.assertIn("Fix:", e.exception.message)
        with self.assertRaises(vc.VyreError) as e:
            src.copy_to(src, 64, src_offset=0, dst_offset=32)  # overlapping
        self.assertEqual(e.exception.status, vc.Status.INVALID_ARGUMENT)
        self.assertIn("Fix:", e.exception.message)
        dst.close()
        with self.assertRaises(vc.VyreError) as e:
            src.copy_to(dst, 16)
        self.assertIn(e.exception.status, (vc.Status.INVALID_HANDLE, vc.Status.STALE_HANDLE))
        with self.assertRaises(TypeError):
            src.copy_to(b"not a buffer")

    def test_device_can_access_peer(self):
        self.assertFalse(vc.device_can_access_peer(self.ctx.device, self.ctx.device))
        with self.assertRaises(vc.VyreError) as e:
            vc.device_can_access_peer(0, 1 << 20)
        self.assertEqual(e.exception.status, vc.Status.NO_DEVICE)
        self.assertIn("peer_access_mask", vc.device_info(self.ctx.device))

    def test_copy_across_devices(self):
        if vc.device_count() < 2:
            self.skipTest("one device (the fake driver has two with FAKE_CUDA_DEVICES=2)")
        other = vc.Context(1)
        try:
            peer = vc.device_can_access_peer(0, 1)
            self.assertEqual(peer, bool(vc.device_info(0)["peer_access_mask"] & 2))
            for staged in (False, True):
                data = _data(self.rng, (1 << 20) + 5)
                src = self.ctx.upload(data)
                dst = other.upload(POISON * len(data))
                src.copy_to(dst, staged=staged)
                self.assertEqual(dst.download(), data, f"staged={staged}")
        finally:
            other.close()


if __name__ == "__main__":
    unittest.main()
