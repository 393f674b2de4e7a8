//! E-graph images: the CPU reference (no driver needed) against a naive
//! congruence closure, and GPU images on the configured driver (the fake
//! driver's e-graph kernels do nothing, so there only creation, columns and
//! validation are checked).

#[macro_use]
mod common;

use std::collections::{BTreeSet, HashMap};

use common::*;
use vyre_cuda::{
    EgraphColumn, EgraphColumns, EgraphDevice, EgraphImage, EgraphNodes, Rebuild, Status,
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
