#!/bin/sh
# egraph_cli_test.sh — ctest cases for `vyre-cuda egraph` and `egraph-bench`.
#
#   egraph_cli_test.sh CASE VYRE_CUDA EGRAPHS_DIR [MORE_EGRAPHS_DIR]
#
# EGRAPHS_DIR is the repository's set (tests/data/egraphs); a file is looked
# up there first, then in MORE_EGRAPHS_DIR (VYRE_EGRAPHS_DIR, the fuller
# ../shared/egraphs) where that is present. The --step cases also read the
# hand-made tests/data/egraph_steps (beside EGRAPHS_DIR).
#
# Exit 0: pass; 1: fail; 77: skipped (no GPU for the GPU cases unless
# VYRE_CUDA_REQUIRE_GPU=1).
set -u

case_name=$1
cli=$2
egraphs=$3
more_egraphs=${4:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vyre-egraph-cli.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() { echo "egraph_cli_test.sh $case_name: FAIL: $*" >&2; exit 1; }
# egraph_file REL: prints the path of e-graph REL (EGRAPHS_DIR's, else
# MORE_EGRAPHS_DIR's); prints nothing and fails when neither holds it.
egraph_file() {
  for dir in "$egraphs" ${more_egraphs:+"$more_egraphs"}; do
    if [ -f "$dir/$1" ]; then
      printf '%s\n' "$dir/$1"
      return 0
    fi
  done
  return 1
}
# need_egraph REL: sets $f to e-graph REL, or fails (the repository's set holds
# every file a case needs).
need_egraph() {
  f=$(egraph_file "$1") ||
    fail "no e-graph $1 in $egraphs${more_egraphs:+ or $more_egraphs}." \
         "Fix: restore tests/data/egraphs."
}
# run ARGS...: runs the CLI, leaving stdout in $tmp/out, stderr in $tmp/err, exit code in $rc.
run() {
  "$cli" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  cat "$tmp/out"
  cat "$tmp/err" >&2
}
expect_rc() { [ "$rc" -eq "$1" ] || fail "expected exit $1, got $rc"; }
expect_in() { grep -F -q -- "$2" "$tmp/$1" || fail "expected \"$2\" in $1"; }
# The GPU cases: skip on a machine without a usable GPU (exit 2 with a Fix).
gpu_or_skip() {
  if [ "$rc" -eq 2 ] && grep -F -q "Fix:" "$tmp/err"; then
    if [ "${VYRE_CUDA_REQUIRE_GPU:-0}" = 1 ]; then fail "VYRE_CUDA_REQUIRE_GPU=1 but no usable GPU"; fi
    echo "egraph_cli_test.sh $case_name: SKIP: no usable GPU here"
    exit 77
  fi
}

steps_dir=$(dirname "$egraphs")/egraph_steps
# need_python: the cases that generate inputs with python3 skip without it.
need_python() {
  command -v python3 >/dev/null 2>&1 && return 0
  echo "egraph_cli_test.sh $case_name: SKIP: no python3 here"
  exit 77
}
# expect_fix ARGS...: the CLI must refuse ARGS with exit 1 and a Fix on stderr.
expect_fix() {
  run "$@"
  expect_rc 1
  expect_in err "Fix:"
}
# split_egraph FILE SEED: writes $tmp/base.json, step1.json, step2.json (FILE's
# nodes in three parts: about half, a quarter, a quarter, each node moved no
# earlier than its children, so every child names a node of its own part or of
# an earlier one), u0.txt, u1.txt, u2.txt (seeded random unions of the classes
# known by then; one per 300 classes, at least one), whole.json (the three parts' nodes in that order, so its
# class ids are numbered as the steps number them) and all_unions.txt.
split_egraph() {
  python3 - "$1" "$2" "$tmp" <<'PY' || fail "cannot split $1"
import json, random, sys
src, seed, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
d = json.load(open(src))
nodes = d["nodes"]
names = list(nodes)
n = len(names)
part = {k: 0 if i < n // 2 else 1 if i < 3 * n // 4 else 2 for i, k in enumerate(names)}
parents = {k: [] for k in names}
for k in names:
    for c in nodes[k].get("children", []):
        parents[c].append(k)
work = list(names)
while work:
    c = work.pop()
    for p in parents[c]:
        if part[p] < part[c]:
            part[p] = part[c]
            work.append(p)
extra = {k: d[k] for k in ("root_eclasses", "class_data") if k in d}
files = []
for i, name in enumerate(("base", "step1", "step2")):
    doc = {"nodes": {k: nodes[k] for k in names if part[k] == i}}
    if i == 2:
        doc.update(extra)
    files.append(doc)
    json.dump(doc, open(f"{out}/{name}.json", "w"))
whole = {"nodes": {k: v for f in files for k, v in f["nodes"].items()}}
whole.update(extra)
json.dump(whole, open(f"{out}/whole.json", "w"))
rng = random.Random(seed)
known, unions = [], []
for i, f in enumerate(files):
    for v in f["nodes"].values():
        if v["eclass"] not in known:
            known.append(v["eclass"])
    # Few enough that the small graphs do not collapse to one class.
    lines = [f"{rng.choice(known)} {rng.choice(known)}\n" for _ in range(1 + len(known) // 300)]
    open(f"{out}/u{i}.txt", "w").writelines(lines)
    unions += lines
open(f"{out}/all_unions.txt", "w").writelines(unions)
print(f"{src}: {[len(f['nodes']) for f in files]} nodes per part")
PY
}
# same_partition A B: the two partition files group the same e-class ids
# (their canonical ids may differ: those follow each run's class numbering).
same_partition() {
  python3 - "$1" "$2" <<'PY'
import sys
def groups(path):
    g = {}
    for line in open(path):
        c, k = line.rstrip("\n").split("\t")
        g.setdefault(k, set()).add(c)
    return sorted(sorted(s) for s in g.values())
sys.exit(0 if groups(sys.argv[1]) == groups(sys.argv[2]) else 1)
PY
}

case "$case_name" in
  cpu_files)
    # A few real e-graphs end to end on the CPU reference.
    for rel in dummy_examples/ab_add.json dummy_examples/loop.json dummy_examples/choice.json \
             egg/math_simplify_add.json rover/fir_8_tap_5iteration_egraph.json \
             tensat/resnet50.json; do
      f=$(egraph_file "$rel") || continue
      run egraph "$f" --device cpu
      expect_rc 0
      expect_in out "classes after:"
      expect_in out "rounds:           1"
      expect_in out "merges:           0"
      expect_in out "time read-back:"
    done
    # The one that is not congruence-closed: 992 merges (README of the folder).
    need_egraph diospyros/vector_matrix_multiply_2x3_3x3_root_58.json
    run egraph "$f" --device cpu --cpu-threads 2
    expect_rc 0
    expect_in out "merges:           992"
    expect_in out "classes after:    679"
    ;;
  json)
    need_egraph diospyros/vector_matrix_multiply_2x3_3x3_root_58.json
    run egraph "$f" --device cpu --json
    expect_rc 0
    [ "$(wc -l <"$tmp/out")" -eq 1 ] || fail "--json printed more than one line"
    for key in '"e_nodes": 15384' '"classes_before": 1671' '"classes_after": 679' '"merges": 992' \
               '"rounds": ' '"times_ms": {"load": ' '"upload": ' '"rebuild": ' '"read_back": '; do
      expect_in out "$key"
    done
    if command -v python3 >/dev/null 2>&1; then
      python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['merges'] == 992, d" \
        "$tmp/out" || fail "--json output is not valid JSON"
    fi
    ;;
  unions_partition)
    # ab_add.json: A-0 is in class 0 and B-0 in class 3; Add(A,A) in 1 and Add(B,B) in 4.
    # Unioning 0 and 3 must merge 1 and 4 by congruence (and more above them).
    need_egraph dummy_examples/ab_add.json
    printf '0 3\n\n' >"$tmp/unions.txt"
    run egraph "$f" --device cpu --unions-file "$tmp/unions.txt" --partition-out "$tmp/p.tsv" --json
    expect_rc 0
    expect_in out '"unions": 1'
    expect_in out '"union_merges": 1'
    classes=$(sed 's/.*"classes": \([0-9]*\).*/\1/' "$tmp/out")
    [ "$(wc -l <"$tmp/p.tsv")" -eq "$classes" ] || fail "partition has $(wc -l <"$tmp/p.tsv") lines for $classes classes"
    canon() { awk -F '\t' -v c="$1" '$1 == c { print $2 }' "$tmp/p.tsv"; }
    [ -n "$(canon 0)" ] || fail "class 0 missing from the partition"
    [ "$(canon 0)" = "$(canon 3)" ] || fail "unioned classes 0 and 3 have different canonical ids"
    [ "$(canon 1)" = "$(canon 4)" ] || fail "congruent classes 1 and 4 have different canonical ids"
    [ "$(canon 0)" != "$(canon 1)" ] || fail "classes 0 and 1 merged"
    # Every canonical id is an e-class id of the file and maps to itself.
    awk -F '\t' 'NR == FNR { seen[$1] = $2; next } END { for (c in seen) if (seen[seen[c]] != seen[c]) exit 1 }' \
      "$tmp/p.tsv" "$tmp/p.tsv" || fail "a canonical id is not its own canonical id"
    # Text output too.
    run egraph "$f" --device cpu --unions-file "$tmp/unions.txt"
    expect_rc 0
    expect_in out "unions:           1 (1 merged classes)"
    ;;
  malformed)
    head -c 100 "$(egraph_file dummy_examples/ab_add.json)" >"$tmp/cut.json" 2>/dev/null ||
      printf '{"nodes": {"a": {"op": "x", "children": [' >"$tmp/cut.json"
    [ -s "$tmp/cut.json" ] || printf '{"nodes": {"a": {"op": "x", "children": [' >"$tmp/cut.json"
    run egraph "$tmp/cut.json" --device cpu
    expect_rc 1
    expect_in err "malformed JSON at byte"
    expect_in err "Fix:"
    printf 'not json at all' >"$tmp/bad.json"
    run egraph "$tmp/bad.json" --device cpu --json
    expect_rc 1
    expect_in err "Fix:"
    expect_in out '"error"'
    printf '{"nodes": {"a": {"op": "x", "eclass": "0", "children": ["ghost"]}}}' >"$tmp/ghost.json"
    run egraph "$tmp/ghost.json" --device cpu
    expect_rc 1
    expect_in err 'child "ghost" names no node'
    expect_in err "Fix:"
    printf '{"nodes": {"a": {"op": 3, "eclass": "0"}}}' >"$tmp/type.json"
    run egraph "$tmp/type.json" --device cpu
    expect_rc 1
    expect_in err '"op" is a number, not a string'
    ;;
  missing_file)
    run egraph "$tmp/does-not-exist.json" --device cpu
    expect_rc 1
    expect_in err "cannot open the e-graph file"
    expect_in err "Fix:"
    ;;
  unknown_union)
    need_egraph dummy_examples/ab_add.json
    printf '0 3\n0 no-such-class\n' >"$tmp/unions.txt"
    run egraph "$f" --device cpu --unions-file "$tmp/unions.txt"
    expect_rc 1
    expect_in err "line 2: unknown e-class id \"no-such-class\""
    expect_in err "Fix:"
    run egraph "$f" --device cpu --unions-file "$tmp/none.txt"
    expect_rc 1
    expect_in err "cannot open the union file"
    ;;
  gpu_matches_cpu)
    # The GPU's partition equals the CPU reference's, with unions.
    need_egraph diospyros/vector_matrix_multiply_2x3_3x3_root_58.json
    printf '0 3\n' >"$tmp/unions.txt"
    run egraph "$f" --unions-file "$tmp/unions.txt" --partition-out "$tmp/gpu.tsv"
    gpu_or_skip
    expect_rc 0
    run egraph "$f" --device cpu --unions-file "$tmp/unions.txt" --partition-out "$tmp/cpu.tsv"
    expect_rc 0
    cmp -s "$tmp/gpu.tsv" "$tmp/cpu.tsv" || fail "GPU and CPU partitions differ"
    ;;
  steps)
    # tests/data/egraph_steps (README there): a' = a, added in step 1 and
    # unioned in step 2, makes f(a'), g(f(a')) and k(g(f(a'))) congruent to
    # their a twins. --step may come before FILE.
    s=$steps_dir
    run egraph --step "$s/step1.json" "$s/base.json" --device cpu \
      --step "$s/step2.json,$s/step2_unions.txt" --partition-out "$tmp/p.tsv"
    expect_rc 0
    cmp -s "$tmp/p.tsv" "$s/expected_partition.tsv" ||
      fail "partition after the steps differs from $s/expected_partition.tsv"
    expect_in out "classes after:    5"
    expect_in out "step 1:           $s/step1.json"
    expect_in out "step 2:           $s/step2.json, unions $s/step2_unions.txt"
    expect_in out "  appended:       3 e-nodes, 3 classes (3 children, 1 new ops)"
    expect_in out "  unions:         1 (1 merged classes)"
    expect_in out "  merges:         3 (congruence)"
    expect_in out "  changed:        4 classes"
    expect_in out "  classes after:  7"
    expect_in out "  time append:"
    # The same as JSON: one object, FILE's keys as before, then "steps".
    need_python
    run egraph "$s/base.json" --device cpu --step "$s/step1.json" \
      --step "$s/step2.json,$s/step2_unions.txt" --json
    expect_rc 0
    python3 - "$tmp/out" <<'PY' || fail "--json steps are wrong"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["e_nodes"] == 5 and d["classes"] == 5 and d["merges"] == 0, d
s1, s2 = d["steps"]
assert (s1["rows_appended"], s1["classes_appended"], s1["merges"], s1["classes_after"]) == (4, 3, 0, 8), s1
assert s1["unions_file"] is None and s1["changed_classes"] == 0, s1
assert (s2["rows_appended"], s2["classes_appended"], s2["unions"], s2["union_merges"]) == (3, 3, 1, 1), s2
assert (s2["merges"], s2["changed_classes"], s2["classes_after"]) == (3, 4, 7), s2
assert (s2["e_nodes_total"], s2["classes_total"]) == (12, 11), s2
assert s2["rows_visited"] > 0 and s2["rounds"] >= 2, s2
assert set(s2["times_ms"]) >= {"load", "append", "rebuild", "read_changes"}, s2
PY
    # Without --step, JSON has an empty "steps".
    run egraph "$s/base.json" --device cpu --json
    expect_rc 0
    expect_in out '"steps": []'
    ;;
  steps_errors)
    s=$steps_dir
    expect_fix egraph "$s/base.json" --device cpu --step "$s/dup_node.json"
    expect_in err 'node "fa": defined already by an earlier file'
    # A node id of an earlier step, not only of FILE.
    expect_fix egraph "$s/base.json" --device cpu --step "$s/step1.json" --step "$s/step1.json"
    expect_in err 'defined already by an earlier file'
    expect_fix egraph "$s/base.json" --device cpu --step "$s/unknown_child.json"
    expect_in err 'child "ghost" names no node'
    # A union may name classes of FILE and of this step or earlier ones only:
    # K1 is step 2's.
    printf 'A2 A\nA2 K1\n' >"$tmp/later.txt"
    expect_fix egraph "$s/base.json" --device cpu --step "$s/step1.json,$tmp/later.txt" \
      --step "$s/step2.json"
    expect_in err 'line 2: unknown e-class id "K1"'
    expect_fix egraph "$s/base.json" --device cpu --step "$s/step1.json,$tmp/none.txt"
    expect_in err "cannot open the union file"
    expect_fix egraph "$s/base.json" --device cpu --step "$tmp/none.json"
    expect_in err "cannot open the e-graph step file"
    expect_fix egraph "$s/base.json" --device cpu --step "$s/README.md"
    expect_in err "malformed JSON at byte"
    printf '{"nodes": {"x": {"op": "x", "eclass": "X", "children": [' >"$tmp/cut.json"
    expect_fix egraph "$s/base.json" --device cpu --step "$tmp/cut.json" --json
    expect_in out '"error"'
    # No DELTA: before the comma, empty, or no argument at all.
    expect_fix egraph "$s/base.json" --device cpu --step ",$s/step2_unions.txt"
    expect_in err "names no DELTA.json"
    expect_fix egraph "$s/base.json" --device cpu --step ""
    expect_fix egraph "$s/base.json" --device cpu --step "$s/step1.json" --step
    expect_in err "names no DELTA.json"
    ;;
  steps_split)
    # Real e-graphs in three parts (FILE and two steps, each with unions): the
    # stepped run's partition is the one-shot run's on the same nodes with all
    # unions, byte for byte, and groups the classes as the original file does.
    need_python
    seed=1
    for rel in diospyros/vector_matrix_multiply_2x3_3x3_root_58.json dummy_examples/loop.json \
               egg/math_simplify_factor.json tensat/vgg_acyclic.json \
               rover/fir_8_tap_5iteration_egraph.json; do
      need_egraph "$rel"
      split_egraph "$f" "$seed"
      seed=$((seed + 1))
      run egraph "$tmp/base.json" --device cpu --unions-file "$tmp/u0.txt" \
        --step "$tmp/step1.json,$tmp/u1.txt" --step "$tmp/step2.json,$tmp/u2.txt" \
        --partition-out "$tmp/steps.tsv"
      expect_rc 0
      run egraph "$tmp/whole.json" --device cpu --unions-file "$tmp/all_unions.txt" \
        --partition-out "$tmp/whole.tsv"
      expect_rc 0
      cmp -s "$tmp/steps.tsv" "$tmp/whole.tsv" || fail "$rel: stepped and one-shot partitions differ"
      run egraph "$f" --device cpu --unions-file "$tmp/all_unions.txt" --partition-out "$tmp/orig.tsv"
      expect_rc 0
      same_partition "$tmp/steps.tsv" "$tmp/orig.tsv" ||
        fail "$rel: the steps group the classes unlike the original file"
    done
    ;;
  gpu_steps)
    # The steps on the GPU: the hand-made answer, and the CPU's partition on a
    # real e-graph split in three.
    s=$steps_dir
    run egraph "$s/base.json" --step "$s/step1.json" --step "$s/step2.json,$s/step2_unions.txt" \
      --partition-out "$tmp/p.tsv"
    gpu_or_skip
    expect_rc 0
    cmp -s "$tmp/p.tsv" "$s/expected_partition.tsv" || fail "GPU partition after the steps is wrong"
    need_python
    need_egraph diospyros/vector_matrix_multiply_2x3_3x3_root_58.json
    split_egraph "$f" 7
    for device in gpu cpu; do
      run egraph "$tmp/base.json" --device $device --unions-file "$tmp/u0.txt" \
        --step "$tmp/step1.json,$tmp/u1.txt" --step "$tmp/step2.json,$tmp/u2.txt" \
        --partition-out "$tmp/$device.tsv"
      expect_rc 0
    done
    cmp -s "$tmp/gpu.tsv" "$tmp/cpu.tsv" || fail "GPU and CPU partitions after the steps differ"
    ;;
  bench)
    # Small synthetic rebuild: GPU when there is one, CPU with 1 thread and all cores.
    run egraph-bench --rows 20000 --arity 2 --seed 3
    expect_rc 0
    expect_in out "partitions: equal"
    expect_in out "cpu-1"
    run egraph-bench --rows 5000 --arity 3 --seed 4 --json --repeat 2
    expect_rc 0
    expect_in out '"partitions_equal": true'
    ;;
  *)
    fail "unknown case (see the script)"
    ;;
esac
echo "egraph_cli_test.sh $case_name: PASS"
exit 0
