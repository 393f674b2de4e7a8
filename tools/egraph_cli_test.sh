#!/bin/sh
# egraph_cli_test.sh — ctest cases for `vyre-cuda egraph` and `egraph-bench`.
#
#   egraph_cli_test.sh CASE VYRE_CUDA EGRAPHS_DIR [MORE_EGRAPHS_DIR]
#
# EGRAPHS_DIR is the repository's set (tests/data/egraphs); a file is looked
# up there first, then in MORE_EGRAPHS_DIR (VYRE_EGRAPHS_DIR, the fuller
# ../shared/egraphs) where that is present.
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
