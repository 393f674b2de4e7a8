#!/usr/bin/env python3
"""Copies the e-graph test set into tests/data/egraphs/ from a full copy of
the extraction-gym e-graphs (default ../shared/egraphs), or checks it.

    scripts/vendor-egraphs.py [--from DIR]          write the set
    scripts/vendor-egraphs.py --check [--from DIR]  compare, change nothing

Each file is the original with the whitespace between JSON tokens removed
(strings, numbers and key order kept byte for byte), so the set stays small;
the copy must parse to exactly what the original parses to. LICENSE is copied
as is. The list below is the set: every file a test names, the diospyros
ones that are not congruence-closed as given, and a few small ones of every
suite (tests/data/egraphs/README.md says which test uses what).
"""

import argparse
import json
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEST = os.path.join(REPO, "tests", "data", "egraphs")

FILES = [
    # Not congruence-closed as given: 992 merges over 7 rounds (egraph_tools_test,
    # cli_egraph_cpu_files, cli_egraph_json, cli_egraph_gpu_matches_cpu).
    "diospyros/vector_matrix_multiply_2x3_3x3_root_58.json",
    "diospyros/simple_vec_add_root_7.json",
    "diospyros/vector_mac_just_mul_or_zero_root_14.json",
    # The hand-made ones (ab_add.json: cli_egraph_unions_partition and more).
    "dummy_examples/ab_add.json",
    "dummy_examples/choice.json",
    "dummy_examples/loop.json",
    "egg/diff_power_simple.json",
    "egg/integ_one.json",
    "egg/integ_part3.json",
    "egg/integ_sin.json",
    "egg/lambda_compose.json",
    "egg/lambda_if.json",
    "egg/lambda_if_simple.json",
    "egg/lambda_let_simple.json",
    "egg/lambda_under.json",
    "egg/math_diff_ln.json",
    "egg/math_powers.json",
    "egg/math_simplify_add.json",
    "egg/math_simplify_factor.json",
    "rover/box_filter_5iteration_egraph.json",
    "rover/fir_8_tap_5iteration_egraph.json",
    "tensat/resnet50.json",
    "tensat/resnet50_acyclic.json",
    "tensat/vgg_acyclic.json",
]

# A JSON string, or a run of whitespace (which is dropped).
TOKEN = re.compile(r'("(?:[^"\\]|\\.)*")|[ \t\r\n]+')


def minify(text):
    return TOKEN.sub(lambda m: m.group(1) or "", text)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--from", dest="source",
                        default=os.path.join(os.path.dirname(REPO), "shared", "egraphs"))
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if not os.path.isdir(args.source):
        sys.exit(f"vendor-egraphs: no folder {args.source}. Fix: pass --from with the "
                 "extraction-gym e-graphs.")
    bad = []
    for rel in FILES + ["LICENSE"]:
        with open(os.path.join(args.source, rel), encoding="utf-8") as f:
            original = f.read()
        copy = original if rel == "LICENSE" else minify(original)
        if rel != "LICENSE" and json.loads(copy) != json.loads(original):
            sys.exit(f"vendor-egraphs: {rel}: the minified copy parses differently")
        path = os.path.join(DEST, rel)
        if args.check:
            try:
                with open(path, encoding="utf-8") as f:
                    if f.read() != copy:
                        bad.append(rel)
            except FileNotFoundError:
                bad.append(rel)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(copy)
    if args.check:
        listed = set(FILES)
        for d, _, names in os.walk(DEST):
            for name in names:
                rel = os.path.relpath(os.path.join(d, name), DEST)
                if name.endswith(".json") and rel not in listed:
                    bad.append(rel + " (not in the list)")
        if bad:
            sys.exit("vendor-egraphs: differs from the source: " + ", ".join(bad) +
                     ". Fix: scripts/vendor-egraphs.py")
        print(f"vendor-egraphs: {len(FILES)} files match {args.source}")
        return
    total = sum(os.path.getsize(os.path.join(DEST, rel)) for rel in FILES)
    print(f"vendor-egraphs: {len(FILES)} files, {total} bytes in {DEST}")


if __name__ == "__main__":
    main()
