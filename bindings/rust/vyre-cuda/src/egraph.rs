//! E-graph images: e-nodes as u32 columns and a union-find over their
//! e-classes, rebuilt to congruence closure on the GPU or with the library's
//! CPU reference, and grown in place by appends.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use vyre_cuda_sys as sys;

use crate::context::ContextInner;
use crate::error::{check, Error, Result, Status};
use crate::{Context, Pending};

/// Where an image lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EgraphDevice {
    /// On the GPU of a context.
    Gpu,
    /// The library's CPU reference (no driver needed).
    Cpu,
}

/// A column of an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EgraphColumn {
    RowClasses,
    RowOps,
    ChildOffsets,
    ChildLengths,
    RowSignatures,
    Children,
    /// class_count entries: the canonical class of every class (read only).
    CanonicalClasses,
}

impl EgraphColumn {
    fn raw(self) -> sys::vyre_egraph_column {
        match self {
            EgraphColumn::RowClasses => sys::VYRE_EGRAPH_COLUMN_ROW_CLASSES,
            EgraphColumn::RowOps => sys::VYRE_EGRAPH_COLUMN_ROW_OPS,
            EgraphColumn::ChildOffsets => sys::VYRE_EGRAPH_COLUMN_CHILD_OFFSETS,
            EgraphColumn::ChildLengths => sys::VYRE_EGRAPH_COLUMN_CHILD_LENGTHS,
            EgraphColumn::RowSignatures => sys::VYRE_EGRAPH_COLUMN_ROW_SIGNATURES,
            EgraphColumn::Children => sys::VYRE_EGRAPH_COLUMN_CHILDREN,
            EgraphColumn::CanonicalClasses => sys::VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES,
        }
    }
}

/// The columns of an image: row r is the e-node
/// `row_ops[r](children[child_offsets[r] .. + child_lengths[r]])` in e-class
/// `row_classes[r]`. Every row column has one entry per row.
#[derive(Clone, Copy, Debug)]
pub struct EgraphColumns<'a> {
    /// Every class id is below this.
    pub class_count: u64,
    pub row_classes: &'a [u32],
    pub row_ops: &'a [u32],
    pub child_offsets: &'a [u32],
    pub child_lengths: &'a [u32],
    /// Optional caller signatures, kept with the columns.
    pub row_signatures: Option<&'a [u32]>,
    pub children: &'a [u32],
}

/// Columns built from e-nodes `(class, op, children)`; class_count is one
/// more than the largest class id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EgraphNodes {
    pub class_count: u64,
    pub row_classes: Vec<u32>,
    pub row_ops: Vec<u32>,
    pub child_offsets: Vec<u32>,
    pub child_lengths: Vec<u32>,
    pub children: Vec<u32>,
}

impl EgraphNodes {
    pub fn new<'c>(nodes: impl IntoIterator<Item = (u32, u32, &'c [u32])>) -> EgraphNodes {
        let mut out = EgraphNodes::default();
        let mut max_class: Option<u32> = None;
        for (class, op, children) in nodes {
            out.row_classes.push(class);
            out.row_ops.push(op);
            out.child_offsets.push(out.children.len() as u32);
            out.child_lengths.push(children.len() as u32);
            out.children.extend_from_slice(children);
            for &c in std::iter::once(&class).chain(children) {
                max_class = Some(max_class.map_or(c, |m| m.max(c)));
            }
        }
        out.class_count = max_class.map_or(0, |m| u64::from(m) + 1);
        out
    }

    pub fn columns(&self) -> EgraphColumns<'_> {
        EgraphColumns {
            class_count: self.class_count,
            row_classes: &self.row_classes,
            row_ops: &self.row_ops,
            child_offsets: &self.child_offsets,
            child_lengths: &self.child_lengths,
            row_signatures: None,
            children: &self.children,
        }
    }

    /// The nodes as rows to append to an image ([`EgraphImage::append`]),
    /// adding `new_classes` classes; the child offsets are already relative
    /// to these nodes' children.
    pub fn append_columns(&self, new_classes: u64) -> EgraphAppend<'_> {
        EgraphAppend {
            class_count: new_classes,
            row_classes: &self.row_classes,
            row_ops: &self.row_ops,
            child_offsets: &self.child_offsets,
            child_lengths: &self.child_lengths,
            row_signatures: None,
            children: &self.children,
        }
    }
}

/// Room an image reserves at creation for [`EgraphImage::append`]
/// (`row_capacity`, `class_capacity`, `child_capacity` of
/// `vyre_egraph_image_desc`). 0, or less than the count created, means
/// exactly the count; appends past the capacity grow it to the next power of
/// two of what they need.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EgraphCapacity {
    pub rows: u64,
    pub classes: u64,
    pub children: u64,
}

/// Rows and classes to append to an image ([`EgraphImage::append`];
/// `vyre_egraph_append_desc`). The new classes are numbered from the
/// image's class count on, each alone; the rows' classes and children may
/// name any class below the image's class count plus `class_count`. Every
/// row column has one entry per row; `child_offsets` index this append's
/// `children` (from 0, in row order).
#[derive(Clone, Copy, Debug, Default)]
pub struct EgraphAppend<'a> {
    /// New classes (0: the rows name existing classes only).
    pub class_count: u64,
    pub row_classes: &'a [u32],
    pub row_ops: &'a [u32],
    pub child_offsets: &'a [u32],
    pub child_lengths: &'a [u32],
    /// Optional caller signatures (None: computed), as at creation.
    pub row_signatures: Option<&'a [u32]>,
    pub children: &'a [u32],
}

/// What [`EgraphImage::info`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EgraphImageInfo {
    pub device: EgraphDevice,
    pub row_count: u64,
    pub class_count: u64,
    pub child_count: u64,
    /// Distinct canonical classes now.
    pub canonical_class_count: u64,
    /// Device (GPU) or host (CPU) bytes the image and its scratch hold.
    pub bytes: u64,
    /// Rows, classes and children the image holds before an append must
    /// grow it.
    pub row_capacity: u64,
    pub class_capacity: u64,
    pub child_capacity: u64,
    /// Classes whose canonical class the last rebuild changed
    /// ([`EgraphImage::changed`]).
    pub changed_class_count: u64,
}

/// The result of a rebuild.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RebuildResult {
    /// Passes run, the last of which found nothing.
    pub rounds: u32,
    /// Classes merged by congruence, and by the unions.
    pub merges: u64,
    pub union_merges: u64,
    /// Distinct canonical classes before the unions and after the rebuild.
    pub classes_before: u64,
    pub classes_after: u64,
    /// Row visits over all rounds: a full round visits every row, an
    /// incremental one the rows appended since the last rebuild and those
    /// with a child whose class was merged.
    pub rows_visited: u64,
    /// Device time (with device timing requested) and host time.
    pub device_ns: u64,
    pub wall_ns: u64,
    /// Classes whose canonical class this rebuild changed (its unions
    /// included); [`EgraphImage::changed`] lists them.
    pub changed_class_count: u64,
    /// Rounds that visited every row (0 for a rebuild that was incremental
    /// throughout).
    pub full_rounds: u32,
}

impl RebuildResult {
    pub(crate) fn from_raw(r: &sys::vyre_egraph_rebuild_result) -> RebuildResult {
        RebuildResult {
            rounds: r.rounds,
            merges: r.merges,
            union_merges: r.union_merges,
            classes_before: r.classes_before,
            classes_after: r.classes_after,
            rows_visited: r.rows_visited,
            device_ns: r.device_ns,
            wall_ns: r.wall_ns,
            changed_class_count: r.changed_class_count,
            full_rounds: r.full_rounds,
        }
    }
}

/// Options of a rebuild: unions applied first, then pass-and-merge to the
/// fixpoint.
#[derive(Debug, Default)]
pub struct Rebuild<'a> {
    /// Pairs of class ids to merge first.
    pub unions: &'a [[u32; 2]],
    /// Receives the canonical class of every class (at least class_count
    /// entries).
    pub canonical_out: Option<&'a mut [u32]>,
    /// Start from every class alone instead of the image's current state.
    pub reset: bool,
    /// Record device events so the result reports device_ns.
    pub device_timing: bool,
    /// Testing: group rows by a deliberately weak hash.
    pub colliding_hash: bool,
    /// GPU images: every round on the device in one launch of a loop graph
    /// that stops at the fixpoint (a CUDA 12.4 driver); pays on rebuilds of
    /// many rounds. Same results.
    pub device_rounds: bool,
    /// Stop after this many rounds even without a fixpoint (0: no limit).
    pub max_rounds: u32,
}

/// An e-graph image (`vyre_egraph_image`). Methods take `&self`: the
/// library serialises calls on one image.
///
/// A saturation loop grows the image in place: match, [`append`] the new
/// e-nodes, [`rebuild`] with the unions found (incrementally: only the new
/// rows and the rows whose children changed class are visited), and update
/// the matcher's indices from [`changed`]:
///
/// ```
/// use vyre_cuda::{EgraphCapacity, EgraphImage, EgraphNodes, Rebuild};
/// # fn main() -> vyre_cuda::Result<()> {
/// const A: u32 = 1;
/// const B: u32 = 2;
/// const F: u32 = 3;
/// // a in class 0, b in 1, f(a) in 2.
/// let nodes = EgraphNodes::new([(0, A, &[][..]), (1, B, &[]), (2, F, &[0])]);
/// let room = EgraphCapacity { rows: 64, classes: 64, children: 64 };
/// let img = EgraphImage::cpu_with_capacity(&nodes.columns(), 0, room)?;
/// img.rebuild(Rebuild::default())?;
/// // f(b) in a new class 3; then a = b makes it f(a)'s.
/// img.append(&EgraphNodes::new([(3, F, &[1][..])]).append_columns(1))?;
/// let r = img.rebuild(Rebuild { unions: &[[0, 1]], ..Default::default() })?;
/// assert_eq!(r.changed_class_count, 2);
/// assert_eq!(img.changed()?, [[1, 0], [3, 2]]); // (class, new canonical class)
/// # Ok(()) }
/// ```
///
/// [`append`]: EgraphImage::append
/// [`rebuild`]: EgraphImage::rebuild
/// [`changed`]: EgraphImage::changed
pub struct EgraphImage {
    handle: sys::vyre_egraph_image,
    ctx: Option<Arc<ContextInner>>,
    // What the image holds, kept here to size reads; appends add to them.
    row_count: AtomicU64,
    class_count: AtomicU64,
    child_count: AtomicU64,
}

impl std::fmt::Debug for EgraphImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EgraphImage({:#x})", self.handle.bits)
    }
}

fn invalid(call: &'static str, message: String) -> Error {
    Error::usage(Status::InvalidArgument, call, message)
}

/// Every row column has as many entries as `row_classes`.
fn check_row_columns(
    call: &'static str,
    row_classes: &[u32],
    columns: [(&str, &[u32]); 3],
    row_signatures: Option<&[u32]>,
) -> Result<()> {
    let rows = row_classes.len();
    let signatures = ("row_signatures", row_signatures.map_or(rows, <[u32]>::len));
    for (name, len) in columns
        .iter()
        .map(|(name, c)| (*name, c.len()))
        .chain(std::iter::once(signatures))
    {
        if len != rows {
            return Err(invalid(
                call,
                format!(
                    "{name} has {len} entries but row_classes has {rows}. Fix: give every row \
                     column one entry per row."
                ),
            ));
        }
    }
    Ok(())
}

/// A slice's pointer, NULL when empty.
fn ptr(s: &[u32]) -> *const u32 {
    if s.is_empty() {
        std::ptr::null()
    } else {
        s.as_ptr()
    }
}

impl EgraphImage {
    /// An image on the library's CPU reference (`threads` 0: every core).
    pub fn cpu(columns: &EgraphColumns<'_>, threads: u32) -> Result<EgraphImage> {
        EgraphImage::create(None, columns, threads, EgraphCapacity::default())
    }

    /// An image on the GPU of `ctx`.
    pub fn gpu(ctx: &Context, columns: &EgraphColumns<'_>) -> Result<EgraphImage> {
        EgraphImage::create(Some(ctx), columns, 0, EgraphCapacity::default())
    }

    /// [`EgraphImage::cpu`] with room reserved for appends.
    pub fn cpu_with_capacity(
        columns: &EgraphColumns<'_>,
        threads: u32,
        capacity: EgraphCapacity,
    ) -> Result<EgraphImage> {
        EgraphImage::create(None, columns, threads, capacity)
    }

    /// [`EgraphImage::gpu`] with room reserved for appends.
    pub fn gpu_with_capacity(
        ctx: &Context,
        columns: &EgraphColumns<'_>,
        capacity: EgraphCapacity,
    ) -> Result<EgraphImage> {
        EgraphImage::create(Some(ctx), columns, 0, capacity)
    }

    fn create(
        ctx: Option<&Context>,
        c: &EgraphColumns<'_>,
        threads: u32,
        capacity: EgraphCapacity,
    ) -> Result<EgraphImage> {
        const CALL: &str = "EgraphImage::new";
        crate::error::library_loaded("vyre_egraph_image_create")?;
        let rows = c.row_classes.len();
        check_row_columns(
            CALL,
            c.row_classes,
            [
                ("row_ops", c.row_ops),
                ("child_offsets", c.child_offsets),
                ("child_lengths", c.child_lengths),
            ],
            c.row_signatures,
        )?;
        let desc = sys::vyre_egraph_image_desc {
            device: if ctx.is_some() {
                sys::VYRE_EGRAPH_DEVICE_GPU
            } else {
                sys::VYRE_EGRAPH_DEVICE_CPU
            },
            context: ctx.map_or(sys::vyre_context::default(), Context::raw),
            row_count: rows as u64,
            class_count: c.class_count,
            child_count: c.children.len() as u64,
            row_classes: ptr(c.row_classes),
            row_ops: ptr(c.row_ops),
            child_offsets: ptr(c.child_offsets),
            child_lengths: ptr(c.child_lengths),
            row_signatures: c.row_signatures.map_or(std::ptr::null(), ptr),
            children: ptr(c.children),
            cpu_threads: threads,
            row_capacity: capacity.rows,
            class_capacity: capacity.classes,
            child_capacity: capacity.children,
            ..Default::default()
        };
        let mut handle = sys::vyre_egraph_image::default();
        // SAFETY: every column pointer covers the count the descriptor gives
        // it (checked above); the library copies the columns.
        check(
            unsafe { sys::vyre_egraph_image_create(&desc, &mut handle) },
            "vyre_egraph_image_create",
        )?;
        Ok(EgraphImage {
            handle,
            ctx: ctx.map(|c| Arc::clone(&c.inner)),
            row_count: AtomicU64::new(rows as u64),
            class_count: AtomicU64::new(c.class_count),
            child_count: AtomicU64::new(c.children.len() as u64),
        })
    }

    /// The raw handle, for `vyre-cuda-sys` calls. Valid while `self` lives.
    pub fn raw(&self) -> sys::vyre_egraph_image {
        self.handle
    }

    /// The context of a GPU image.
    pub fn context(&self) -> Option<Context> {
        self.ctx.as_ref().map(Context::from_inner)
    }

    pub fn class_count(&self) -> u64 {
        self.class_count.load(Ordering::Acquire)
    }

    pub fn row_count(&self) -> u64 {
        self.row_count.load(Ordering::Acquire)
    }

    pub fn child_count(&self) -> u64 {
        self.child_count.load(Ordering::Acquire)
    }

    pub fn info(&self) -> Result<EgraphImageInfo> {
        let mut i = sys::vyre_egraph_image_info::default();
        // SAFETY: struct_size is set; a valid out-pointer.
        check(
            unsafe { sys::vyre_egraph_image_info_get(self.handle, &mut i) },
            "vyre_egraph_image_info_get",
        )?;
        Ok(EgraphImageInfo {
            device: if i.device == sys::VYRE_EGRAPH_DEVICE_CPU {
                EgraphDevice::Cpu
            } else {
                EgraphDevice::Gpu
            },
            row_count: i.row_count,
            class_count: i.class_count,
            child_count: i.child_count,
            canonical_class_count: i.canonical_class_count,
            bytes: i.bytes,
            row_capacity: i.row_capacity,
            class_capacity: i.class_capacity,
            child_capacity: i.child_capacity,
            changed_class_count: i.changed_class_count,
        })
    }

    /// Copies entries [first, first + dst.len()) of a column into `dst`.
    pub fn read(&self, column: EgraphColumn, first: u64, dst: &mut [u32]) -> Result<()> {
        let p = if dst.is_empty() {
            std::ptr::null_mut()
        } else {
            dst.as_mut_ptr()
        };
        // SAFETY: `dst` has room for the count passed.
        check(
            unsafe {
                sys::vyre_egraph_image_read(self.handle, column.raw(), first, dst.len() as u64, p)
            },
            "vyre_egraph_image_read",
        )
    }

    /// A whole column.
    pub fn read_column(&self, column: EgraphColumn) -> Result<Vec<u32>> {
        let n = match column {
            EgraphColumn::Children => self.child_count(),
            EgraphColumn::CanonicalClasses => self.class_count(),
            _ => self.row_count(),
        };
        let mut out = vec![0u32; n as usize];
        self.read(column, 0, &mut out)?;
        Ok(out)
    }

    /// Overwrites entries [first, first + src.len()) of a row column or of
    /// the children; the rows affected are validated first.
    pub fn write(&self, column: EgraphColumn, first: u64, src: &[u32]) -> Result<()> {
        let p = if src.is_empty() {
            std::ptr::null()
        } else {
            src.as_ptr()
        };
        // SAFETY: `src` holds the count passed.
        check(
            unsafe {
                sys::vyre_egraph_image_write(self.handle, column.raw(), first, src.len() as u64, p)
            },
            "vyre_egraph_image_write",
        )
    }

    /// One congruence pass, merging nothing: the sorted, deduplicated pairs
    /// (left < right) of canonical classes congruent rows put apart.
    pub fn pass(&self) -> Result<Vec<[u32; 2]>> {
        loop {
            let mut count = 0u64;
            // SAFETY: NULL with capacity 0 asks the count.
            check(
                unsafe { sys::vyre_egraph_pass(self.handle, std::ptr::null_mut(), 0, &mut count) },
                "vyre_egraph_pass",
            )?;
            let mut pairs = vec![[0u32; 2]; count as usize];
            match self.pass_into(&mut pairs) {
                Ok(n) => {
                    pairs.truncate(n as usize);
                    return Ok(pairs);
                }
                // The image changed between the two calls: ask again.
                Err(e) if e.status() == Status::OutOfRange => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// One pass into `pairs`; returns the number of pairs. More pairs than
    /// `pairs` holds is [`Status::OutOfRange`] (nothing written).
    pub fn pass_into(&self, pairs: &mut [[u32; 2]]) -> Result<u64> {
        let mut count = 0u64;
        let p = if pairs.is_empty() {
            std::ptr::null_mut()
        } else {
            pairs.as_mut_ptr().cast::<u32>()
        };
        // SAFETY: room for pairs.len() pairs of 2 u32.
        check(
            unsafe { sys::vyre_egraph_pass(self.handle, p, pairs.len() as u64, &mut count) },
            "vyre_egraph_pass",
        )?;
        Ok(count)
    }

    /// Appends classes and rows in place (`vyre_egraph_image_append`): the
    /// new classes are numbered from [`EgraphImage::class_count`] on, each
    /// alone; the union-find and the canonical classes are kept, and the
    /// next rebuild visits the new rows. The rows are validated as at
    /// creation; a refused append changes nothing. Within the capacity only
    /// the new rows are copied; past it the image grows (see
    /// [`EgraphCapacity`]).
    pub fn append(&self, a: &EgraphAppend<'_>) -> Result<()> {
        check_row_columns(
            "EgraphImage::append",
            a.row_classes,
            [
                ("row_ops", a.row_ops),
                ("child_offsets", a.child_offsets),
                ("child_lengths", a.child_lengths),
            ],
            a.row_signatures,
        )?;
        let desc = sys::vyre_egraph_append_desc {
            class_count: a.class_count,
            row_count: a.row_classes.len() as u64,
            child_count: a.children.len() as u64,
            row_classes: ptr(a.row_classes),
            row_ops: ptr(a.row_ops),
            child_offsets: ptr(a.child_offsets),
            child_lengths: ptr(a.child_lengths),
            row_signatures: a.row_signatures.map_or(std::ptr::null(), ptr),
            children: ptr(a.children),
            ..Default::default()
        };
        // SAFETY: every column pointer covers the count the descriptor gives
        // it (checked above); the library copies the columns.
        check(
            unsafe { sys::vyre_egraph_image_append(self.handle, &desc) },
            "vyre_egraph_image_append",
        )?;
        self.row_count.fetch_add(desc.row_count, Ordering::AcqRel);
        self.class_count
            .fetch_add(desc.class_count, Ordering::AcqRel);
        self.child_count
            .fetch_add(desc.child_count, Ordering::AcqRel);
        Ok(())
    }

    /// The classes whose canonical class the last rebuild changed
    /// (`vyre_egraph_changed_read`): pairs (class, new canonical class),
    /// sorted by class. With [`Rebuild::reset`] the rebuild's start is every
    /// class alone; appended classes start alone.
    pub fn changed(&self) -> Result<Vec<[u32; 2]>> {
        loop {
            let mut count = 0u64;
            // SAFETY: NULL with capacity 0 asks the count.
            check(
                unsafe {
                    sys::vyre_egraph_changed_read(self.handle, std::ptr::null_mut(), 0, &mut count)
                },
                "vyre_egraph_changed_read",
            )?;
            let mut pairs = vec![[0u32; 2]; count as usize];
            match self.changed_into(&mut pairs) {
                Ok(n) => {
                    pairs.truncate(n as usize);
                    return Ok(pairs);
                }
                // A rebuild ran between the two calls: ask again.
                Err(e) if e.status() == Status::OutOfRange => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// [`EgraphImage::changed`] into `pairs`; returns the number of pairs.
    /// More pairs than `pairs` holds is [`Status::OutOfRange`] (nothing
    /// written).
    pub fn changed_into(&self, pairs: &mut [[u32; 2]]) -> Result<u64> {
        let mut count = 0u64;
        let p = if pairs.is_empty() {
            std::ptr::null_mut()
        } else {
            pairs.as_mut_ptr().cast::<u32>()
        };
        // SAFETY: room for pairs.len() pairs of 2 u32.
        check(
            unsafe {
                sys::vyre_egraph_changed_read(self.handle, p, pairs.len() as u64, &mut count)
            },
            "vyre_egraph_changed_read",
        )?;
        Ok(count)
    }

    fn rebuild_desc(
        &self,
        r: &mut Rebuild<'_>,
        call: &'static str,
    ) -> Result<sys::vyre_egraph_rebuild_desc> {
        let class_count = self.class_count();
        let canonical_out = match r.canonical_out.as_deref_mut() {
            Some(out) if (out.len() as u64) < class_count => {
                return Err(invalid(
                    call,
                    format!(
                        "canonical_out holds {} entries but the image has {} classes. Fix: pass \
                         room for class_count entries.",
                        out.len(),
                        class_count
                    ),
                ))
            }
            Some(out) if !out.is_empty() => out.as_mut_ptr(),
            _ => std::ptr::null_mut(),
        };
        let mut flags = 0;
        if r.reset {
            flags |= sys::VYRE_EGRAPH_REBUILD_RESET;
        }
        if r.device_timing {
            flags |= sys::VYRE_EGRAPH_REBUILD_DEVICE_TIMING;
        }
        if r.colliding_hash {
            flags |= sys::VYRE_EGRAPH_REBUILD_COLLIDING_HASH;
        }
        if r.device_rounds {
            flags |= sys::VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS;
        }
        Ok(sys::vyre_egraph_rebuild_desc {
            flags,
            unions: if r.unions.is_empty() {
                std::ptr::null()
            } else {
                r.unions.as_ptr().cast()
            },
            union_count: r.unions.len() as u64,
            canonical_out,
            max_rounds: r.max_rounds,
            ..Default::default()
        })
    }

    /// Applies the unions and rebuilds to the fixpoint (congruence closure).
    pub fn rebuild(&self, mut rebuild: Rebuild<'_>) -> Result<RebuildResult> {
        let desc = self.rebuild_desc(&mut rebuild, "EgraphImage::rebuild")?;
        let mut out = sys::vyre_egraph_rebuild_result::default();
        // SAFETY: unions and canonical_out are valid for the call.
        check(
            unsafe { sys::vyre_egraph_rebuild(self.handle, &desc, &mut out) },
            "vyre_egraph_rebuild",
        )?;
        Ok(RebuildResult::from_raw(&out))
    }

    /// Enqueues a rebuild (a CPU image's runs to completion here); the wait
    /// finishes it, writes canonical_out and makes
    /// [`Pending::rebuild_result`] available. While it is unwaited, other
    /// calls on the image are [`Status::InvalidState`].
    pub fn rebuild_async<'a>(&self, mut rebuild: Rebuild<'a>) -> Result<Pending<'a>> {
        let mut desc = self.rebuild_desc(&mut rebuild, "EgraphImage::rebuild_async")?;
        let mut result = Box::new(sys::vyre_egraph_rebuild_result::default());
        desc.result_out = &mut *result;
        let mut handle = sys::vyre_pending::default();
        // SAFETY: unions are read before return; canonical_out stays borrowed
        // by the Pending for 'a, and result_out lives in it (boxed).
        check(
            unsafe { sys::vyre_egraph_rebuild_async(self.handle, &desc, &mut handle) },
            "vyre_egraph_rebuild_async",
        )?;
        let mut pending = Pending::new(handle, self.ctx.clone(), &[]);
        pending.rebuild_result = Some(result);
        Ok(pending)
    }

    /// Destroys the image now and returns the library's answer.
    pub fn destroy(mut self) -> Result<()> {
        let handle = std::mem::take(&mut self.handle);
        // SAFETY: the handle is ours and destroyed once.
        check(
            unsafe { sys::vyre_egraph_image_destroy(handle) },
            "vyre_egraph_image_destroy",
        )
    }
}

impl Drop for EgraphImage {
    fn drop(&mut self) {
        if self.handle.bits != 0 {
            // SAFETY: the handle is ours; errors are ignored in drop.
            let _ = unsafe { sys::vyre_egraph_image_destroy(self.handle) };
        }
    }
}

impl Context {
    /// An e-graph image on this context's GPU.
    pub fn egraph_image(&self, columns: &EgraphColumns<'_>) -> Result<EgraphImage> {
        EgraphImage::gpu(self, columns)
    }
}

impl Pending<'_> {
    /// The result of a waited e-graph rebuild (None for other work, or
    /// before the wait).
    pub fn rebuild_result(&self) -> Option<RebuildResult> {
        self.rebuild_result
            .as_deref()
            .filter(|_| self.waited)
            .map(RebuildResult::from_raw)
    }
}
