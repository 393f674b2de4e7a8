//! E-graph images: the CPU reference (no driver needed) against a naive
//! congruence closure, and GPU images on the configured driver (the fake
//! driver's e-graph kernels do nothing, so there only creation, columns and
//! validation are checked).

#[macro_use]
mod common;

use std::collections::{BTreeSet, HashMap};

use common::*;
use vyre_cuda::{
    EgraphAppend, EgraphCapacity, EgraphColumn, EgraphColumns, EgraphDevice, EgraphImage,
    EgraphNodes, Rebuild, Status,
};

const A: u32 = 1;
const B: u32 = 2;
const F: u32 = 3;

fn small() -> EgraphNodes {
    EgraphNodes::new([(0, A, &[][..]), (1, B, &[]), (2, F, &[0]), (3, F, &[1])])
}

struct UnionFind(Vec<u32>);

impl UnionFind {
    fn find(&mut self, x: u32) -> u32 {
        let mut r = x;
        while self.0[r as usize] != r {
            r = self.0[r as usize];
        }
        let mut x = x;
        while self.0[x as usize] != r {
            let next = self.0[x as usize];
            self.0[x as usize] = r;
            x = next;
        }
        r
    }
    /// Joins two sets under the smaller root; true if they were apart.
    fn union(&mut self, a: u32, b: u32) -> bool {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return false;
        }
        let (lo, hi) = (ra.min(rb), ra.max(rb));
        self.0[hi as usize] = lo;
        true
    }
}

/// The pairs one pass reports under `uf`, merging nothing.
fn naive_pass(nodes: &EgraphNodes, uf: &mut UnionFind) -> Vec<[u32; 2]> {
    let mut groups: HashMap<(u32, Vec<u32>), BTreeSet<u32>> = HashMap::new();
    for r in 0..nodes.row_classes.len() {
        let off = nodes.child_offsets[r] as usize;
        let len = nodes.child_lengths[r] as usize;
        let key = (
            nodes.row_ops[r],
            nodes.children[off..off + len]
                .iter()
                .map(|&c| uf.find(c))
                .collect(),
        );
        groups
            .entry(key)
            .or_default()
            .insert(uf.find(nodes.row_classes[r]));
    }
    let mut pairs = BTreeSet::new();
    for classes in groups.values() {
        let m = *classes.iter().next().unwrap();
        for &c in classes.iter().skip(1) {
            pairs.insert([m, c]);
        }
    }
    pairs.into_iter().collect()
}

/// Canonical classes after the unions and congruence closure.
fn naive_closure(nodes: &EgraphNodes, unions: &[[u32; 2]]) -> Vec<u32> {
    let mut uf = UnionFind((0..nodes.class_count as u32).collect());
    for &[a, b] in unions {
        uf.union(a, b);
    }
    loop {
        let pairs = naive_pass(nodes, &mut uf);
        if pairs.is_empty() {
            break;
        }
        for [a, b] in pairs {
            uf.union(a, b);
        }
    }
    (0..nodes.class_count as u32).map(|c| uf.find(c)).collect()
}

fn random_egraph(rng: &mut Rng, classes: u32, rows: usize) -> EgraphNodes {
    let children: Vec<Vec<u32>> = (0..rows)
        .map(|_| {
            (0..rng.below(3))
                .map(|_| rng.below(classes as u64) as u32)
                .collect()
        })
        .collect();
    let nodes: Vec<(u32, u32, &[u32])> = children
        .iter()
        .enumerate()
        .map(|(i, ch)| {
            // Every class gets a row first, then random ones.
            let class = if (i as u32) < classes {
                i as u32
            } else {
                rng.below(classes as u64) as u32
            };
            (class, 1 + rng.below(4) as u32, ch.as_slice())
        })
        .collect();
    let mut out = EgraphNodes::new(nodes);
    out.class_count = classes as u64;
    out
}

#[test]
fn small_closure_on_the_cpu() {
    let nodes = small();
    let img = EgraphImage::cpu(&nodes.columns(), 1).unwrap();
    assert_eq!(
        img.pass().unwrap(),
        Vec::<[u32; 2]>::new(),
        "f(a) and f(b) are apart while a != b"
    );
    let mut canonical = vec![0u32; 4];
    let result = img
        .rebuild(Rebuild {
            unions: &[[0, 1]],
            canonical_out: Some(&mut canonical),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(canonical, [0, 0, 2, 2]);
    assert_eq!((result.union_merges, result.merges), (1, 1));
    assert_eq!((result.classes_before, result.classes_after), (4, 2));
    assert!(result.rounds >= 1);
    assert_eq!(
        img.read_column(EgraphColumn::CanonicalClasses).unwrap(),
        [0, 0, 2, 2]
    );
    let info = img.info().unwrap();
    assert_eq!(info.device, EgraphDevice::Cpu);
    assert_eq!(
        (
            info.row_count,
            info.class_count,
            info.child_count,
            info.canonical_class_count
        ),
        (4, 4, 2, 2)
    );
    assert!(info.bytes > 0);
    // RESET starts from every class alone.
    let r = img
        .rebuild(Rebuild {
            reset: true,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.classes_after, 4);
    assert!(img.context().is_none());
}

#[test]
fn random_graphs_match_a_naive_closure() {
    let mut rng = Rng::new(21);
    for round in 0..40 {
        let classes = 2 + rng.below(40) as u32;
        let rows = classes as usize + rng.below(60) as usize;
        let nodes = random_egraph(&mut rng, classes, rows);
        let unions: Vec<[u32; 2]> = (0..rng.below(4))
            .map(|_| {
                [
                    rng.below(classes as u64) as u32,
                    rng.below(classes as u64) as u32,
                ]
            })
            .collect();
        let expected = naive_closure(&nodes, &unions);
        for threads in [1, 0, 3] {
            let img = EgraphImage::cpu(&nodes.columns(), threads).unwrap();
            let mut uf = UnionFind((0..classes).collect());
            assert_eq!(
                img.pass().unwrap(),
                naive_pass(&nodes, &mut uf),
                "round {round}: pass"
            );
            let mut canonical = vec![u32::MAX; classes as usize];
            let colliding = round % 2 == 1;
            let r = img
                .rebuild(Rebuild {
                    unions: &unions,
                    canonical_out: Some(&mut canonical),
                    colliding_hash: colliding,
                    ..Default::default()
                })
                .unwrap();
            assert_eq!(canonical, expected, "round {round}, {threads} threads");
            let distinct: BTreeSet<u32> = expected.iter().copied().collect();
            assert_eq!(r.classes_after, distinct.len() as u64);
            assert_eq!(img.pass().unwrap(), Vec::<[u32; 2]>::new(), "a fixpoint");
        }
    }
}

#[test]
fn different_payloads_never_merge() {
    // Const(1) and Const(2) are different ops: their classes stay apart.
    let nodes = EgraphNodes::new([(0, 10, &[][..]), (1, 11, &[]), (2, F, &[0]), (3, F, &[1])]);
    let img = EgraphImage::cpu(&nodes.columns(), 0).unwrap();
    let r = img
        .rebuild(Rebuild {
            colliding_hash: true,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.merges, 0);
    assert_eq!(
        img.read_column(EgraphColumn::CanonicalClasses).unwrap(),
        [0, 1, 2, 3]
    );
}

#[test]
fn columns_read_write_and_async_rebuild() {
    let nodes = small();
    let img = EgraphImage::cpu(&nodes.columns(), 1).unwrap();
    assert_eq!(
        img.read_column(EgraphColumn::RowClasses).unwrap(),
        nodes.row_classes
    );
    assert_eq!(
        img.read_column(EgraphColumn::RowOps).unwrap(),
        nodes.row_ops
    );
    assert_eq!(
        img.read_column(EgraphColumn::ChildOffsets).unwrap(),
        nodes.child_offsets
    );
    assert_eq!(
        img.read_column(EgraphColumn::ChildLengths).unwrap(),
        nodes.child_lengths
    );
    assert_eq!(
        img.read_column(EgraphColumn::Children).unwrap(),
        nodes.children
    );
    let mut two = [0u32; 2];
    img.read(EgraphColumn::RowOps, 2, &mut two).unwrap();
    assert_eq!(two, [F, F]);
    assert_error(
        img.read(EgraphColumn::RowOps, 3, &mut two),
        Status::OutOfRange,
    );
    // f(b) becomes f(a): congruent to row 2 without any union.
    img.write(EgraphColumn::Children, 1, &[0]).unwrap();
    assert_eq!(img.pass().unwrap(), [[2, 3]]);
    assert_error(
        img.write(EgraphColumn::Children, 0, &[99]),
        Status::InvalidArgument,
    );
    assert_error(
        img.write(EgraphColumn::CanonicalClasses, 0, &[0]),
        Status::InvalidArgument,
    );

    let mut canonical = vec![0u32; 4];
    let mut pending = img
        .rebuild_async(Rebuild {
            canonical_out: Some(&mut canonical),
            ..Default::default()
        })
        .unwrap();
    assert!(
        pending.rebuild_result().is_none(),
        "no result before the wait"
    );
    pending.wait().unwrap();
    let r = pending.rebuild_result().unwrap();
    assert_eq!(r.merges, 1);
    assert!(pending.timing().unwrap().wall_ns > 0);
    drop(pending);
    assert_eq!(canonical, [0, 1, 2, 2]);
    let mut room = [[0u32; 2]; 0];
    assert_eq!(img.pass_into(&mut room).unwrap(), 0);
}

#[test]
fn bad_columns_are_errors_with_a_fix() {
    let nodes = small();
    let mut cols = nodes.columns();
    cols.row_ops = &nodes.row_ops[..3];
    assert_error(EgraphImage::cpu(&cols, 1), Status::InvalidArgument);
    let mut cols = nodes.columns();
    cols.class_count = 2; // class ids 2 and 3 are out of range
    assert_error(EgraphImage::cpu(&cols, 1), Status::InvalidArgument);
    let bad_children = [0u32, 7];
    let mut cols = nodes.columns();
    cols.children = &bad_children;
    assert_error(EgraphImage::cpu(&cols, 1), Status::InvalidArgument);
    let img = EgraphImage::cpu(&nodes.columns(), 1).unwrap();
    let mut short = vec![0u32; 3];
    assert_error(
        img.rebuild(Rebuild {
            canonical_out: Some(&mut short),
            ..Default::default()
        }),
        Status::InvalidArgument,
    );
    assert_error(
        img.rebuild(Rebuild {
            unions: &[[0, 9]],
            ..Default::default()
        }),
        Status::InvalidArgument,
    );
    let signatures = [1u32, 2, 3];
    let mut cols = nodes.columns();
    cols.row_signatures = Some(&signatures);
    assert_error(EgraphImage::cpu(&cols, 1), Status::InvalidArgument);
    // Empty images are valid.
    let empty = EgraphImage::cpu(
        &EgraphColumns {
            class_count: 0,
            row_classes: &[],
            row_ops: &[],
            child_offsets: &[],
            child_lengths: &[],
            row_signatures: None,
            children: &[],
        },
        1,
    )
    .unwrap();
    assert_eq!(empty.pass().unwrap(), Vec::<[u32; 2]>::new());
    assert_eq!(empty.rebuild(Rebuild::default()).unwrap().classes_after, 0);
    img.destroy().unwrap();
}

#[test]
fn gpu_images() {
    with_context!(ctx);
    let nodes = small();
    let img = ctx.egraph_image(&nodes.columns()).unwrap();
    let info = img.info().unwrap();
    assert_eq!(info.device, EgraphDevice::Gpu);
    assert_eq!(
        (info.row_count, info.class_count, info.child_count),
        (4, 4, 2)
    );
    assert_eq!(
        img.read_column(EgraphColumn::RowOps).unwrap(),
        nodes.row_ops
    );
    assert_eq!(
        img.read_column(EgraphColumn::Children).unwrap(),
        nodes.children
    );
    assert!(img.context().is_some());
    let mut cols = nodes.columns();
    cols.class_count = 3;
    assert_error(ctx.egraph_image(&cols), Status::InvalidArgument);
    if fake() {
        assert_no_misuse();
        return; // the fake driver's e-graph kernels do nothing
    }
    let mut canonical = vec![0u32; 4];
    img.rebuild(Rebuild {
        unions: &[[0, 1]],
        canonical_out: Some(&mut canonical),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(canonical, [0, 0, 2, 2]);
    let mut rng = Rng::new(22);
    for round in 0..20 {
        let classes = 2 + rng.below(200) as u32;
        let rows = classes as usize + rng.below(300) as usize;
        let nodes = random_egraph(&mut rng, classes, rows);
        let unions = [[
            rng.below(classes as u64) as u32,
            rng.below(classes as u64) as u32,
        ]];
        let img = ctx.egraph_image(&nodes.columns()).unwrap();
        let mut uf = UnionFind((0..classes).collect());
        assert_eq!(
            img.pass().unwrap(),
            naive_pass(&nodes, &mut uf),
            "round {round}: pass"
        );
        let mut canonical = vec![0u32; classes as usize];
        let mut pending = img
            .rebuild_async(Rebuild {
                unions: &unions,
                canonical_out: Some(&mut canonical),
                device_timing: true,
                ..Default::default()
            })
            .unwrap();
        pending.wait().unwrap();
        drop(pending);
        assert_eq!(canonical, naive_closure(&nodes, &unions), "round {round}");
    }
}

// ---------------------------------------------------------------------------
// Growing images: vyre_egraph_image_append and vyre_egraph_changed_read
// ---------------------------------------------------------------------------

/// A leaf op no random row uses: the fresh class it names is alone until a
/// union joins it.
const FRESH_LEAF: u32 = 100;

/// Rows to append to `base` (classes below `old`): `new_classes` classes
/// numbered from `old`, rows in old and new classes with children naming
/// both, and one row, in new class old + 1, that is an old row's op with a
/// child swapped for the fresh leaf class `old`: `union` (that leaf with
/// the swapped child) makes it congruent to the old row `twin`.
struct Growth {
    rows: EgraphNodes,
    new_classes: u32,
    union: [u32; 2],
    twin: usize,
}

fn growth(rng: &mut Rng, base: &EgraphNodes, old: u32) -> Growth {
    let new_classes = 2 + rng.below(8) as u32;
    let total = u64::from(old + new_classes);
    let (leaf, twin_class) = (old, old + 1);
    // The old row to mirror: one with children when there is one.
    let twin = (0..base.row_classes.len())
        .find(|&r| base.child_lengths[r] > 0)
        .unwrap_or(0);
    let off = base.child_offsets[twin] as usize;
    let mut twin_children = base.children[off..off + base.child_lengths[twin] as usize].to_vec();
    let union = match twin_children.first_mut() {
        Some(first) => [leaf, std::mem::replace(first, leaf)],
        // A leaf twin is congruent at once; the union then joins the fresh
        // leaf to the twin's class.
        None => [leaf, base.row_classes[twin]],
    };
    let mut nodes: Vec<(u32, u32, Vec<u32>)> = vec![
        (leaf, FRESH_LEAF, vec![]),
        (twin_class, base.row_ops[twin], twin_children),
    ];
    for _ in 0..1 + rng.below(12) {
        let children = (0..rng.below(3)).map(|_| rng.below(total) as u32).collect();
        nodes.push((rng.below(total) as u32, 1 + rng.below(4) as u32, children));
    }
    let mut rows = EgraphNodes::new(nodes.iter().map(|(c, o, ch)| (*c, *o, ch.as_slice())));
    rows.class_count = u64::from(new_classes);
    Growth {
        rows,
        new_classes,
        union,
        twin,
    }
}

/// `base` followed by `added` (whose offsets are relative to its own
/// children), over `class_count` classes: the e-graph an image of
/// everything at once holds.
fn concat(base: &EgraphNodes, added: &EgraphNodes, class_count: u64) -> EgraphNodes {
    let mut out = base.clone();
    let shift = base.children.len() as u32;
    out.row_classes.extend_from_slice(&added.row_classes);
    out.row_ops.extend_from_slice(&added.row_ops);
    out.child_offsets
        .extend(added.child_offsets.iter().map(|&o| o + shift));
    out.child_lengths.extend_from_slice(&added.child_lengths);
    out.children.extend_from_slice(&added.children);
    out.class_count = class_count;
    out
}

/// The pairs (class, after[class]) where the canonical class changed,
/// sorted by class: what vyre_egraph_changed_read lists.
fn diff(before: &[u32], after: &[u32]) -> Vec<[u32; 2]> {
    assert_eq!(before.len(), after.len());
    (0..after.len())
        .filter(|&c| before[c] != after[c])
        .map(|c| [c as u32, after[c]])
        .collect()
}

fn distinct(canonical: &[u32]) -> u64 {
    canonical.iter().collect::<BTreeSet<_>>().len() as u64
}

/// What the image holds: info's counts, every column and the changed list
/// (a refused append must leave all of it as it was).
fn snapshot(img: &EgraphImage) -> (u64, u64, u64, u64, Vec<Vec<u32>>, Vec<[u32; 2]>) {
    let info = img.info().unwrap();
    let columns = [
        EgraphColumn::RowClasses,
        EgraphColumn::RowOps,
        EgraphColumn::ChildOffsets,
        EgraphColumn::ChildLengths,
        EgraphColumn::RowSignatures,
        EgraphColumn::Children,
        EgraphColumn::CanonicalClasses,
    ]
    .map(|c| img.read_column(c).unwrap());
    (
        info.row_count,
        info.class_count,
        info.child_count,
        info.canonical_class_count,
        columns.to_vec(),
        img.changed().unwrap(),
    )
}

/// Appends that the library (or the binding) refuses, each leaving the
/// image unchanged.
fn check_refused_appends(img: &EgraphImage, g: &Growth) {
    let before = snapshot(img);
    let old = img.class_count() as u32;
    let total = old + g.new_classes;
    let rows = &g.rows;
    let mut classes = rows.row_classes.clone();
    *classes.last_mut().unwrap() = total; // past the new class count
    let mut bad = rows.append_columns(u64::from(g.new_classes));
    bad.row_classes = &classes;
    let e = assert_error(img.append(&bad), Status::InvalidArgument);
    assert!(e.message().contains("row_classes["), "{e}");
    assert_eq!(e.call(), "vyre_egraph_image_append");
    // The same rows without their new classes name classes past the count.
    assert_error(img.append(&rows.append_columns(0)), Status::InvalidArgument);
    let mut children = rows.children.clone();
    children.push(total);
    let mut lengths = rows.child_lengths.clone();
    *lengths.last_mut().unwrap() += 1;
    let mut bad = rows.append_columns(u64::from(g.new_classes));
    bad.children = &children;
    bad.child_lengths = &lengths;
    let e = assert_error(img.append(&bad), Status::InvalidArgument);
    assert!(e.message().contains("children["), "{e}");
    // A child range past the append's children (offsets index them, not the
    // image's).
    let mut bad = rows.append_columns(u64::from(g.new_classes));
    bad.child_lengths = &lengths;
    assert_error(img.append(&bad), Status::OutOfRange);
    // Short row columns: refused by the binding before the call.
    let mut bad = rows.append_columns(u64::from(g.new_classes));
    bad.row_ops = &rows.row_ops[1..];
    let e = assert_error(img.append(&bad), Status::InvalidArgument);
    assert!(e.message().contains("row_ops"), "{e}");
    let signatures = vec![7u32; rows.row_classes.len() + 1];
    let mut bad = rows.append_columns(u64::from(g.new_classes));
    bad.row_signatures = Some(&signatures);
    assert_error(img.append(&bad), Status::InvalidArgument);
    assert_eq!(snapshot(img), before, "a refused append changed the image");
    assert_eq!(img.class_count(), before.1);
    assert_eq!(img.row_count(), before.0);
}

/// Create, rebuild, append rows naming old and new classes, rebuild with a
/// union that makes an appended row congruent to an old one: canonical
/// classes against a naive closure of everything and against an image of
/// everything at once (`fresh`), changed pairs against the diff of the
/// canonical classes, info's counts and capacities, and refused appends.
fn check_growth(
    seed: u64,
    rounds: u32,
    make: &dyn Fn(&EgraphColumns<'_>, EgraphCapacity) -> vyre_cuda::Result<EgraphImage>,
    fresh: &dyn Fn(&EgraphColumns<'_>) -> vyre_cuda::Result<EgraphImage>,
) {
    let mut rng = Rng::new(seed);
    for round in 0..rounds {
        let old = 2 + rng.below(30) as u32;
        let row_count = old as usize + rng.below(40) as usize;
        let base = random_egraph(&mut rng, old, row_count);
        let unions1: Vec<[u32; 2]> = (0..rng.below(3))
            .map(|_| [rng.below(old as u64) as u32, rng.below(old as u64) as u32])
            .collect();
        let g = growth(&mut rng, &base, old);
        let total = old + g.new_classes;
        let (rows, children) = (base.row_classes.len() as u64, base.children.len() as u64);
        let (added_rows, added_children) = (
            g.rows.row_classes.len() as u64,
            g.rows.children.len() as u64,
        );
        // No reservation; room for the append; less than the counts (taken
        // as the counts).
        let reserved = match round % 3 {
            0 => EgraphCapacity::default(),
            1 => EgraphCapacity {
                rows: rows + added_rows + 5,
                classes: u64::from(total) + 3,
                children: children + added_children + 7,
            },
            _ => EgraphCapacity {
                rows: 1,
                classes: 1,
                children: 0,
            },
        };
        let label = format!("seed {seed} round {round} ({reserved:?})");
        let img = make(&base.columns(), reserved).unwrap();
        let info = img.info().unwrap();
        assert_eq!(
            (info.row_count, info.class_count, info.child_count),
            (rows, u64::from(old), children),
            "{label}"
        );
        assert!(
            info.row_capacity >= rows.max(reserved.rows),
            "{label}: {info:?}"
        );
        assert!(
            info.class_capacity >= u64::from(old).max(reserved.classes),
            "{label}: {info:?}"
        );
        assert!(
            info.child_capacity >= children.max(reserved.children),
            "{label}: {info:?}"
        );
        assert_eq!(info.changed_class_count, 0, "{label}: nothing rebuilt yet");
        assert_eq!(img.changed().unwrap(), Vec::<[u32; 2]>::new(), "{label}");

        // The first rebuild: every class starts alone.
        let mut canonical1 = vec![u32::MAX; old as usize];
        let r1 = img
            .rebuild(Rebuild {
                unions: &unions1,
                canonical_out: Some(&mut canonical1),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(
            canonical1,
            naive_closure(&base, &unions1),
            "{label}: first rebuild"
        );
        let identity: Vec<u32> = (0..old).collect();
        let changed1 = diff(&identity, &canonical1);
        assert_eq!(img.changed().unwrap(), changed1, "{label}: first changes");
        assert_eq!(r1.changed_class_count, changed1.len() as u64, "{label}");
        assert_eq!(
            img.info().unwrap().changed_class_count,
            changed1.len() as u64
        );
        assert!(
            r1.full_rounds >= 1 && r1.full_rounds <= r1.rounds,
            "{label}: {r1:?}"
        );
        // (An empty slice would ask the count.)
        if changed1.len() >= 2 {
            let mut short = vec![[0u32; 2]; changed1.len() - 1];
            let e = assert_error(img.changed_into(&mut short), Status::OutOfRange);
            assert_eq!(e.call(), "vyre_egraph_changed_read");
            assert!(short.iter().all(|&p| p == [0, 0]), "nothing written");
        }
        let mut room = vec![[u32::MAX; 2]; changed1.len() + 2];
        assert_eq!(img.changed_into(&mut room).unwrap(), changed1.len() as u64);
        assert_eq!(room[..changed1.len()], changed1[..]);

        check_refused_appends(&img, &g);

        // The append: new classes start alone, the old ones keep their
        // canonical classes, and nothing is rebuilt yet.
        let capacity_before = img.info().unwrap();
        img.append(&g.rows.append_columns(u64::from(g.new_classes)))
            .unwrap();
        assert_eq!(img.class_count(), u64::from(total));
        assert_eq!(img.row_count(), rows + added_rows);
        assert_eq!(img.child_count(), children + added_children);
        let info = img.info().unwrap();
        assert_eq!(
            (info.row_count, info.class_count, info.child_count),
            (
                rows + added_rows,
                u64::from(total),
                children + added_children
            ),
            "{label}"
        );
        assert_eq!(
            info.canonical_class_count,
            distinct(&canonical1) + u64::from(g.new_classes),
            "{label}"
        );
        assert!(info.row_capacity >= info.row_count, "{label}: {info:?}");
        assert!(info.class_capacity >= info.class_count, "{label}: {info:?}");
        assert!(info.child_capacity >= info.child_count, "{label}: {info:?}");
        if round % 3 == 1 {
            // Within the reservation: the image did not grow.
            assert_eq!(
                (info.row_capacity, info.class_capacity, info.child_capacity),
                (
                    capacity_before.row_capacity,
                    capacity_before.class_capacity,
                    capacity_before.child_capacity
                ),
                "{label}"
            );
        }
        // "The last rebuild" is still the first.
        assert_eq!(info.changed_class_count, changed1.len() as u64, "{label}");
        assert_eq!(img.changed().unwrap(), changed1, "{label}");
        let combined = concat(&base, &g.rows, u64::from(total));
        for (column, want) in [
            (EgraphColumn::RowClasses, &combined.row_classes),
            (EgraphColumn::RowOps, &combined.row_ops),
            (EgraphColumn::ChildOffsets, &combined.child_offsets),
            (EgraphColumn::ChildLengths, &combined.child_lengths),
            (EgraphColumn::Children, &combined.children),
        ] {
            assert_eq!(
                &img.read_column(column).unwrap(),
                want,
                "{label}: {column:?}"
            );
        }
        let mut start = canonical1.clone();
        start.extend(old..total);
        assert_eq!(
            img.read_column(EgraphColumn::CanonicalClasses).unwrap(),
            start,
            "{label}: canonical classes after the append"
        );

        // The second rebuild, with the union that makes the twin row
        // congruent to its old row (and sometimes one joining old and new).
        let mut unions2 = vec![g.union];
        if rng.below(2) == 0 {
            unions2.push([
                rng.below(old as u64) as u32,
                old + rng.below(g.new_classes as u64) as u32,
            ]);
        }
        let mut canonical2 = vec![u32::MAX; total as usize];
        let r2 = img
            .rebuild(Rebuild {
                unions: &unions2,
                canonical_out: Some(&mut canonical2),
                ..Default::default()
            })
            .unwrap();
        let all_unions: Vec<[u32; 2]> = unions1.iter().chain(&unions2).copied().collect();
        let expected = naive_closure(&combined, &all_unions);
        assert_eq!(canonical2, expected, "{label}: after the append");
        assert_eq!(
            canonical2[old as usize + 1],
            canonical2[base.row_classes[g.twin] as usize],
            "{label}: the appended twin row joins its old row's class"
        );
        let at_once = fresh(&combined.columns()).unwrap();
        let mut canonical_at_once = vec![u32::MAX; total as usize];
        at_once
            .rebuild(Rebuild {
                unions: &all_unions,
                canonical_out: Some(&mut canonical_at_once),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(
            canonical2, canonical_at_once,
            "{label}: an image of everything at once"
        );
        let changed2 = diff(&start, &canonical2);
        assert_eq!(
            img.changed().unwrap(),
            changed2,
            "{label}: changes after the append"
        );
        assert_eq!(r2.changed_class_count, changed2.len() as u64, "{label}");
        assert!(r2.full_rounds <= r2.rounds, "{label}: {r2:?}");
        assert_eq!(
            (r2.classes_before, r2.classes_after),
            (distinct(&start), distinct(&expected)),
            "{label}"
        );
        let info = img.info().unwrap();
        assert_eq!(info.changed_class_count, changed2.len() as u64);
        assert_eq!(info.canonical_class_count, distinct(&expected));
        assert_eq!(
            img.pass().unwrap(),
            Vec::<[u32; 2]>::new(),
            "{label}: a fixpoint"
        );

        // Classes without rows, then a rebuild that changes nothing.
        img.append(&EgraphAppend {
            class_count: 2,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(img.class_count(), u64::from(total) + 2);
        let r3 = img.rebuild(Rebuild::default()).unwrap();
        assert_eq!((r3.merges, r3.changed_class_count), (0, 0), "{label}");
        assert_eq!(img.changed().unwrap(), Vec::<[u32; 2]>::new());
        let mut after = expected.clone();
        after.extend([total, total + 1]);
        assert_eq!(
            img.read_column(EgraphColumn::CanonicalClasses).unwrap(),
            after,
            "{label}"
        );
        // RESET: the changes from every class alone.
        let r4 = img
            .rebuild(Rebuild {
                unions: &all_unions,
                reset: true,
                ..Default::default()
            })
            .unwrap();
        let identity: Vec<u32> = (0..total + 2).collect();
        assert_eq!(
            img.changed().unwrap(),
            diff(&identity, &after),
            "{label}: reset"
        );
        assert_eq!(r4.changed_class_count, diff(&identity, &after).len() as u64);
    }
}

#[test]
fn appended_rows_rebuild_like_an_image_of_everything() {
    for threads in [1, 0] {
        check_growth(
            23 + u64::from(threads),
            24,
            &|cols, capacity| EgraphImage::cpu_with_capacity(cols, threads, capacity),
            &|cols| EgraphImage::cpu(cols, threads),
        );
    }
}

#[test]
fn appends_to_empty_and_small_images() {
    // An empty image grows from nothing.
    let img = EgraphImage::cpu(&EgraphNodes::default().columns(), 1).unwrap();
    let info = img.info().unwrap();
    assert_eq!(
        (info.row_count, info.class_count, info.row_capacity),
        (0, 0, 0)
    );
    let rows = EgraphNodes::new([(0, A, &[][..]), (1, B, &[]), (2, F, &[0]), (3, F, &[1])]);
    // Rows but no class to name: refused.
    assert_error(img.append(&rows.append_columns(0)), Status::InvalidArgument);
    img.append(&rows.append_columns(4)).unwrap();
    let r = img
        .rebuild(Rebuild {
            unions: &[[1, 0]],
            ..Default::default()
        })
        .unwrap();
    assert_eq!((r.union_merges, r.merges, r.changed_class_count), (1, 1, 2));
    assert_eq!(img.changed().unwrap(), [[1, 0], [3, 2]]);
    // Signatures given with the rows are kept as given.
    let small = small();
    let img = EgraphImage::cpu_with_capacity(
        &small.columns(),
        1,
        EgraphCapacity {
            rows: 64,
            classes: 64,
            children: 64,
        },
    )
    .unwrap();
    let info = img.info().unwrap();
    assert!(info.row_capacity >= 64 && info.class_capacity >= 64 && info.child_capacity >= 64);
    let more = EgraphNodes::new([(4, F, &[2][..]), (5, F, &[3])]);
    let mut append = more.append_columns(2);
    append.row_signatures = Some(&[11, 12]);
    img.append(&append).unwrap();
    assert_eq!(
        img.read_column(EgraphColumn::RowSignatures).unwrap()[4..],
        [11, 12]
    );
    assert_eq!(
        img.read_column(EgraphColumn::ChildOffsets).unwrap(),
        [0, 0, 0, 1, 2, 3]
    );
    let mut canonical = vec![0u32; 6];
    img.rebuild(Rebuild {
        unions: &[[0, 1]],
        canonical_out: Some(&mut canonical),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(canonical, [0, 0, 2, 2, 4, 4]);
    assert_eq!(img.changed().unwrap(), [[1, 0], [3, 2], [5, 4]]);
    assert_eq!(
        img.info().unwrap().row_capacity,
        info.row_capacity,
        "within the reservation"
    );
    // An unwaited asynchronous rebuild refuses appends and the changed list.
    let mut pending = img.rebuild_async(Rebuild::default()).unwrap();
    assert_error(img.append(&more.append_columns(2)), Status::InvalidState);
    assert_error(img.changed(), Status::InvalidState);
    pending.wait().unwrap();
    drop(pending);
    assert_eq!(img.row_count(), 6);
    img.destroy().unwrap();
}

/// Appends and refused appends without a rebuild on `img` (an image of
/// `base` created with the `reserved` capacity): what the fake driver checks
/// too. It validates appends on the host but runs none of the other e-graph
/// kernels, so the appended rows' child offsets (rebased on the device), the
/// signatures and the canonical classes are not compared here.
fn check_appends_without_rebuild(img: &EgraphImage, base: &EgraphNodes, reserved: EgraphCapacity) {
    let info = img.info().unwrap();
    assert!(info.row_capacity >= reserved.rows, "{info:?}");
    assert!(info.class_capacity >= reserved.classes, "{info:?}");
    assert!(info.child_capacity >= reserved.children, "{info:?}");
    let old = img.class_count() as u32;
    let mut rng = Rng::new(27);
    let g = growth(&mut rng, base, old);
    check_refused_appends(img, &g);
    img.append(&g.rows.append_columns(u64::from(g.new_classes)))
        .unwrap();
    let mut combined = concat(base, &g.rows, u64::from(old + g.new_classes));
    let compare = |combined: &EgraphNodes, label: &str| {
        let info = img.info().unwrap();
        assert_eq!(
            (info.row_count, info.class_count, info.child_count),
            (
                combined.row_classes.len() as u64,
                combined.class_count,
                combined.children.len() as u64
            ),
            "{label}"
        );
        assert_eq!(info.changed_class_count, 0, "{label}: nothing rebuilt");
        assert!(info.row_capacity >= info.row_count, "{label}: {info:?}");
        assert!(info.class_capacity >= info.class_count, "{label}: {info:?}");
        assert!(info.child_capacity >= info.child_count, "{label}: {info:?}");
        for (column, want) in [
            (EgraphColumn::RowClasses, &combined.row_classes),
            (EgraphColumn::RowOps, &combined.row_ops),
            (EgraphColumn::ChildLengths, &combined.child_lengths),
            (EgraphColumn::Children, &combined.children),
        ] {
            assert_eq!(
                &img.read_column(column).unwrap(),
                want,
                "{label}: {column:?}"
            );
        }
        info
    };
    let within = compare(&combined, "within the reservation");
    assert_eq!(
        (
            within.row_capacity,
            within.class_capacity,
            within.child_capacity
        ),
        (info.row_capacity, info.class_capacity, info.child_capacity),
        "an append within the reservation does not grow the image"
    );
    // Past the reservation: the image grows and keeps every row.
    let rows = reserved.rows as u32 + 7;
    let nodes: Vec<(u32, u32, [u32; 1])> = (0..rows)
        .map(|i| (i % old, 1 + i % 4, [(i * 7) % old]))
        .collect();
    let more = EgraphNodes::new(nodes.iter().map(|(c, o, ch)| (*c, *o, &ch[..])));
    img.append(&more.append_columns(0)).unwrap();
    combined = concat(&combined, &more, combined.class_count);
    let grown = compare(&combined, "past the reservation");
    assert!(grown.row_capacity > within.row_capacity, "{grown:?}");
    assert_eq!(img.changed().unwrap(), Vec::<[u32; 2]>::new());
}

#[test]
fn gpu_images_grow_like_cpu_images() {
    with_context!(ctx);
    let mut rng = Rng::new(28);
    let base = random_egraph(&mut rng, 12, 30);
    let reserved = EgraphCapacity {
        rows: 64,
        classes: 32,
        children: 96,
    };
    let img = EgraphImage::gpu_with_capacity(&ctx, &base.columns(), reserved).unwrap();
    assert_eq!(img.info().unwrap().device, EgraphDevice::Gpu);
    check_appends_without_rebuild(&img, &base, reserved);
    drop(img);
    if fake() {
        assert_no_misuse();
        return; // the fake driver runs no rebuild kernel
    }
    // GPU images against CPU images of everything at once, and the reverse.
    check_growth(
        25,
        12,
        &|cols, capacity| EgraphImage::gpu_with_capacity(&ctx, cols, capacity),
        &|cols| EgraphImage::cpu(cols, 0),
    );
    check_growth(
        26,
        6,
        &|cols, capacity| EgraphImage::cpu_with_capacity(cols, 0, capacity),
        &|cols| ctx.egraph_image(cols),
    );
}

#[test]
fn cpu_images_append_without_rebuilds() {
    // The same checks as on the fake driver, on the CPU reference.
    let mut rng = Rng::new(28);
    let base = random_egraph(&mut rng, 12, 30);
    let reserved = EgraphCapacity {
        rows: 64,
        classes: 32,
        children: 96,
    };
    let img = EgraphImage::cpu_with_capacity(&base.columns(), 1, reserved).unwrap();
    check_appends_without_rebuild(&img, &base, reserved);
}
