"""The wheel, end to end (ctest python_wheel; not a unittest module).

Builds the wheel exactly as a user's `pip install ./bindings/python` would
(`pip wheel`, PEP 517, scikit-build-core from PyPI driving CMake), checks
its contents and tag, installs it into a fresh venv with no index, and from
outside the source tree, with no VYRE_CUDA_LIBRARY or PYTHONPATH:
  - the bundled library is the one loaded (library_path(), /proc/self/maps),
    and the compiled fast path (vyre_cuda._fast, in the wheel) is in use;
  - without a driver, Context() raises VyreError NO_DRIVER with a Fix;
  - on the fake driver, a vector add (host and resident) is right element
    by element;
  - VYRE_CUDA_LIBRARY still overrides the bundled library;
  - with VYRE_CUDA_STATIC_ABSL on in pyproject.toml, the bundled library
    needs no shared Abseil (ldd); the Abseil source is fetched first
    (scripts/fetch-abseil-source.sh, cached).

    python3 wheel_check.py --work DIR --fake-driver libfake_cuda.so \
        [--build-dir DIR] [--override-library libvyre_cuda.so]

--build-dir keeps the CMake build between runs (ccache makes a cold one
cheaper). Exits 77 (a ctest skip) only when the build backend can be
neither downloaded (no index reachable) nor imported locally.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DIR = os.path.dirname(HERE)
SKIP = 77
NO_INDEX_MARKERS = ("No matching distribution found for scikit-build-core",
                    "Could not find a version that satisfies the requirement scikit-build-core",
                    "Failed to establish a new connection", "Network is unreachable",
                    "Temporary failure in name resolution", "ProxyError")


def log(msg):
    print(f"wheel_check: {msg}", flush=True)


def run(cmd, **kwargs):
    log("$ " + " ".join(cmd))
    return subprocess.run(cmd, **kwargs)


def skip_without_a_backend(work):
    """Exits 77 when the build backend can be neither imported here nor
    downloaded: checked first, so that an offline machine (the GPU machine)
    skips instead of failing on the Abseil source fetch that comes before the
    build."""
    try:
        import scikit_build_core  # noqa: F401
        return
    except ImportError:
        pass
    probe = os.path.join(work, "backend-probe")
    shutil.rmtree(probe, ignore_errors=True)
    proc = run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                "--retries", "0", "--timeout", "15",
                "-d", probe, "scikit-build-core>=0.10"],
               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0 and any(marker in proc.stdout for marker in NO_INDEX_MARKERS):
        print(proc.stdout[-4000:])
        log("SKIP: no package index reachable for scikit-build-core and it is not "
            "installed here. Fix: allow access to PyPI, or pip install "
            "'scikit-build-core>=0.10' into this interpreter.")
        raise SystemExit(SKIP)


def build_wheel(args, dist):
    shutil.rmtree(dist, ignore_errors=True)
    os.makedirs(dist)
    env = dict(os.environ)
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", dist,
           "--disable-pip-version-check"]
    if args.build_dir:
        # --config-settings, not its short form -C: Debian 12's pip 23.0 lacks -C.
        cmd += [f"--config-settings=build-dir={args.build_dir}"]
    cmd.append(PACKAGE_DIR)
    proc = run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(proc.stdout[-20000:])
    if proc.returncode != 0:
        if not any(marker in proc.stdout for marker in NO_INDEX_MARKERS):
            raise SystemExit(f"wheel_check: pip wheel failed ({proc.returncode})")
        try:
            import scikit_build_core  # noqa: F401
        except ImportError:
            log("SKIP: no package index reachable for scikit-build-core and it is not "
                "installed here. Fix: allow access to PyPI, or pip install "
                "'scikit-build-core>=0.10' into this interpreter.")
            raise SystemExit(SKIP)
        log("no package index reachable: building with the installed scikit-build-core")
        proc = run(cmd[:4] + ["--no-build-isolation"] + cmd[4:], env=env)
        if proc.returncode != 0:
            raise SystemExit(f"wheel_check: pip wheel failed ({proc.returncode})")
    wheels = glob.glob(os.path.join(dist, "*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"wheel_check: expected one wheel in {dist}, found {wheels}")
    return wheels[0]


def static_absl_expected():
    with open(os.path.join(PACKAGE_DIR, "pyproject.toml"), encoding="utf-8") as f:
        return re.search(r'^\s*VYRE_CUDA_STATIC_ABSL\s*=\s*"ON"', f.read(), re.M) is not None


def check_wheel(wheel):
    name = os.path.basename(wheel)
    # The compiled module makes the wheel this CPython's (cpXY-cpXY-linux_*).
    py = "cp%d%d" % sys.version_info[:2]
    if not re.fullmatch(rf"vyre_cuda-[\w.]+-{py}-{py}-linux_\w+\.whl", name):
        raise SystemExit(f"wheel_check: unexpected wheel name/tag {name} (want a "
                         f"{py}-{py}-linux_* platform wheel)")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for need in ("vyre_cuda/__init__.py", "vyre_cuda/_dlpack.py", "vyre_cuda/py.typed",
                     "vyre_cuda/_lib/libvyre_cuda.so.0"):
            if need not in names:
                raise SystemExit(f"wheel_check: {need} missing from {name}: {sorted(names)}")
        fast = [n for n in names if re.fullmatch(r"vyre_cuda/_fast\.cpython-\d+[\w-]*\.so", n)]
        if len(fast) != 1:
            raise SystemExit(f"wheel_check: the wheel should hold one vyre_cuda/_fast "
                             f"extension module, holds {fast}: {sorted(names)}")
        libs = [n for n in names if "libvyre_cuda" in n]
        if libs != ["vyre_cuda/_lib/libvyre_cuda.so.0"]:
            raise SystemExit(f"wheel_check: the wheel should hold one library file, holds "
                             f"{libs}")
        for n in names:
            if n.startswith(("vyre_cuda/include", "vyre_cuda/lib", "include/", "lib/")):
                raise SystemExit(f"wheel_check: {n} in the wheel: only the package belongs")
    log(f"{name}: {len(names)} files, tag and contents as expected")


def fresh_venv(path):
    shutil.rmtree(path, ignore_errors=True)
    proc = run([sys.executable, "-m", "venv", path])
    if proc.returncode != 0:
        raise SystemExit("wheel_check: python3 -m venv failed. Fix: install python3-venv.")
    return os.path.join(path, "bin", "python")


CHECK = r"""
import json, os, sys, array, random
import vyre_cuda as vc
out = {"file": vc.__file__, "library": vc.library_path(), "version": vc.version_string(),
       "bundled": vc.BUNDLED_LIBRARY, "fast": vc._loader._fast is not None,
       "fast_reason": vc._loader._fast_reason}
with open("/proc/self/maps") as f:
    out["mapped"] = sorted({line.split()[-1] for line in f if "libvyre_cuda" in line})
mode = sys.argv[1]
if mode == "no-driver":
    try:
        vc.Context()
        out["error"] = None
    except vc.VyreError as e:
        out["error"] = [int(e.status), e.status_name, e.message]
elif mode == "fake":
    n = 3000
    rng = random.Random(5)
    a = array.array("I", (rng.randrange(1, 2 ** 32) for _ in range(n)))
    b = array.array("I", (rng.randrange(1, 2 ** 32) for _ in range(n)))
    want = [(x + y) & 0xFFFFFFFF for x, y in zip(a, b)]
    with vc.Context() as ctx:
        prog = ctx.program(PTX, "vyre_test_add_u32",
                           [vc.Binding("input"), vc.Binding("input"), vc.Binding("output")])
        host = array.array("I")
        host.frombytes(bytes(prog.dispatch([a, b, 4 * n], params=[n])[2]))
        da, db, dout = ctx.upload(a), ctx.upload(b), ctx.alloc(4 * n)
        prog.dispatch([da, db, dout], params=[n])
        res = array.array("I")
        res.frombytes(bytes(dout.download()))
    out["host_bad"] = sum(1 for i in range(n) if host[i] != want[i])
    out["resident_bad"] = sum(1 for i in range(n) if res[i] != want[i])
    out["count"] = [len(host), len(res)]
print(json.dumps(out))
"""


def run_check(python, mode, work, ptx, **env_extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VYRE_CUDA_LIBRARY", "VYRE_CUDA_DRIVER_LIBRARY",
                        "VYRE_CUDA_TEST_FAKE_DRIVER", "PYTHONHOME")}
    env.update(env_extra)
    code = "PTX = " + repr(ptx) + "\n" + CHECK
    log(f"$ {python} -c <check> {mode}  (in {work})")
    proc = subprocess.run([python, "-c", code, mode], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"wheel_check: {mode} check failed ({proc.returncode}):\n"
                         f"{proc.stdout}\n{proc.stderr}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    log(f"{mode}: {json.dumps(result)}")
    return result


def expect(cond, what):
    if not cond:
        raise SystemExit(f"wheel_check: FAILED: {what}")


def read_add_ptx():
    # The fake driver runs vyre_test_add_u32 on the host; the PTX text is the
    # test kernels' one source (tests/kernels), as the unittest suite's.
    path = os.path.join(os.path.dirname(os.path.dirname(PACKAGE_DIR)), "tests", "kernels",
                        "add_u32.ptx")
    expect(os.path.isfile(path), f"the test kernel {path} exists")
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", required=True)
    parser.add_argument("--fake-driver", required=True)
    parser.add_argument("--build-dir")
    parser.add_argument("--override-library")
    args = parser.parse_args()
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    expect(not os.path.abspath(work).startswith(PACKAGE_DIR + os.sep),
           "the work directory is outside the package's source tree")

    skip_without_a_backend(work)
    if static_absl_expected():
        # The wheel's library compiles Debian's Abseil source in: fetch it
        # (idempotent, cached in .deps/src) as a user would first.
        repo = os.path.dirname(os.path.dirname(PACKAGE_DIR))
        proc = run([os.path.join(repo, "scripts", "fetch-abseil-source.sh")])
        if proc.returncode != 0:
            # A machine without Debian's source archive (the GPU machine:
            # Ubuntu, offline) cannot build the self-contained library at
            # all. CI still fails on a broken fetch: scripts/test.sh runs
            # scripts/check-self-contained.sh, which needs the same source.
            log("SKIP: Abseil's Debian source could not be fetched (see above), so the "
                "self-contained library cannot be built here. Fix: run "
                "scripts/fetch-abseil-source.sh on a Debian machine with network access, or "
                "copy its .deps/src here.")
            raise SystemExit(SKIP)
    wheel = build_wheel(args, os.path.join(work, "dist"))
    check_wheel(wheel)
    python = fresh_venv(os.path.join(work, "venv"))
    proc = run([python, "-m", "pip", "install", "--no-index", "--no-deps",
                "--disable-pip-version-check", wheel])
    expect(proc.returncode == 0, "pip install of the wheel into a fresh venv")

    ptx = read_add_ptx()
    venv_prefix = os.path.realpath(os.path.join(work, "venv"))
    got = run_check(python, "no-driver", work, ptx,
                    VYRE_CUDA_DRIVER_LIBRARY="/nonexistent/libcuda.so.1")
    expect(os.path.realpath(got["file"]).startswith(venv_prefix + os.sep),
           f"vyre_cuda imported from the venv, not {got['file']}")
    expect(got["library"] == os.path.realpath(got["bundled"]),
           f"the bundled library is loaded: {got['library']} vs {got['bundled']}")
    expect(got["library"].startswith(venv_prefix + os.sep), "the library is the venv's")
    expect(got["mapped"] == [got["library"]],
           f"exactly the bundled libvyre_cuda is mapped: {got['mapped']}")
    expect(got["fast"], f"the wheel's compiled fast path is in use: {got['fast_reason']}")
    expect(got["error"] is not None, "Context() failed without a driver")
    status, status_name, message = got["error"]
    expect(status == 6 and status_name == "VYRE_STATUS_NO_DRIVER",
           f"NO_DRIVER, got {status_name}")
    expect("Fix:" in message, f"the message has a Fix: {message}")

    got = run_check(python, "fake", work, ptx,
                    VYRE_CUDA_DRIVER_LIBRARY=os.path.abspath(args.fake_driver))
    expect(got["library"] == os.path.realpath(got["bundled"]), "the bundled library is loaded")
    expect(got["fast"], f"the compiled fast path is in use: {got['fast_reason']}")
    expect(got["count"] == [3000, 3000], f"3000 results each, got {got['count']}")
    expect(got["host_bad"] == 0 and got["resident_bad"] == 0,
           f"every element right (host wrong: {got['host_bad']}, resident wrong: "
           f"{got['resident_bad']})")

    if args.override_library:
        got = run_check(python, "no-driver", work, ptx,
                        VYRE_CUDA_DRIVER_LIBRARY="/nonexistent/libcuda.so.1",
                        VYRE_CUDA_LIBRARY=os.path.abspath(args.override_library))
        expect(got["library"] == os.path.realpath(args.override_library),
               f"VYRE_CUDA_LIBRARY overrides the bundled library: {got['library']}")
        expect(got["error"] is not None and got["error"][0] == 6, "NO_DRIVER through it too")

    bundled = os.path.join(os.path.dirname(got["file"]), "_lib", "libvyre_cuda.so.0")
    ldd = run(["ldd", bundled], capture_output=True, text=True)
    print(ldd.stdout)
    if static_absl_expected():
        expect("libabsl" not in ldd.stdout, "the bundled library needs no shared Abseil")
    log("PASS")


if __name__ == "__main__":
    main()
