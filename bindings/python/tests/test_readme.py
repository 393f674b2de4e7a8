"""The complete program in bindings/python/README.md, run as a user would.

Run from bindings/python:  python3 -m unittest discover -s tests -v
Environment as for test_vyre_cuda.py. Without a driver the program must exit
2 with the library's Fix; with one (the fake driver in CI, a GPU) it must
print "readme_example: OK".
"""

import os
import re
import subprocess
import sys
import tempfile
import unittest

import vyre_cuda as vc

from test_vyre_cuda import FAKE_DRIVER, NO_DRIVER_PATH, REQUIRE_GPU

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "README.md")


def readme_program():
    """The README's one fenced python block that is a whole program."""
    with open(README, encoding="utf-8") as f:
        blocks = re.findall(r"^```python\n(.*?)^```$", f.read(), re.M | re.S)
    programs = [b for b in blocks if 'if __name__ == "__main__":' in b]
    if len(programs) != 1:
        raise AssertionError(f"{README}: {len(programs)} complete programs, expected one")
    return programs[0]


class ReadmeProgramTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.script = os.path.join(cls.tmp.name, "readme_example.py")
        with open(cls.script, "w", encoding="utf-8") as f:
            f.write(readme_program())

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_program(self, **env_changes):
        env = dict(os.environ)
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(vc.__file__)))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root,
                                                          env.get("PYTHONPATH")]))
        env.update(env_changes)
        # From another directory: nothing of the source tree but the package.
        return subprocess.run([sys.executable, self.script], env=env, cwd=self.tmp.name,
                              capture_output=True, text=True, timeout=300)

    def test_without_a_driver_it_exits_2_with_the_fix(self):
        proc = self.run_program(VYRE_CUDA_DRIVER_LIBRARY=NO_DRIVER_PATH)
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertIn("VYRE_STATUS_NO_DRIVER", proc.stderr)
        self.assertIn("Fix:", proc.stderr)
        self.assertNotIn("readme_example: OK", proc.stdout)

    def test_it_runs(self):
        proc = self.run_program()
        output = proc.stdout + proc.stderr
        if proc.returncode == 2 and not REQUIRE_GPU:
            self.skipTest(f"no usable GPU: {proc.stderr.strip()}")
        if "VYRE_STATUS_NVRTC_UNAVAILABLE" in proc.stderr and not (REQUIRE_GPU and
                                                                  not FAKE_DRIVER):
            self.skipTest(f"no NVRTC here for the program's CUDA C++: {proc.stderr.strip()}")
        self.assertEqual(proc.returncode, 0, output)
        self.assertIn("readme_example: OK", proc.stdout)


if __name__ == "__main__":
    unittest.main()
