"""E-graph images: EgraphImage, EgraphRebuildResult and their u32 columns."""

from __future__ import annotations

import array as _array
import ctypes
import operator
import sys
from ctypes import POINTER, byref, c_uint32, c_uint64, c_void_p
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from ._cdefs import (EGRAPH_REBUILD_COLLIDING_HASH, EGRAPH_REBUILD_DEVICE_ROUNDS,
                     EGRAPH_REBUILD_DEVICE_TIMING,
                     EGRAPH_REBUILD_RESET, _U32_MAX, EgraphAppendDescStruct, EgraphColumn,
                     EgraphDevice, EgraphImageDescStruct, EgraphImageHandle,
                     EgraphImageInfoStruct, EgraphRebuildDescStruct, EgraphRebuildResultStruct,
                     PendingHandle, Status, _new, _struct_dict, _unsigned)
from ._errors import VyreError, _call
from ._host_memory import _readable, _writable
from ._loader import _require
from ._context import Context, _Object
from ._program import Pending


# ---------------------------------------------------------------------------
# E-graph images
# ---------------------------------------------------------------------------

# array.array's type code for 4-byte unsigned items ("I" on the usual platforms).
_U32_CODE = "I" if _array.array("I").itemsize == 4 else "L"
# memoryview formats of native u32 items, which C can read in place.
_U32_FORMATS = {_U32_CODE, "@" + _U32_CODE, "=I", "<I" if sys.byteorder == "little" else ">I"}


def _is_numpy_array(obj):
    return type(obj).__module__.partition(".")[0] == "numpy" and hasattr(obj, "dtype")


def _u32_pointer(address):
    """A uint32_t* for an address (None: NULL). It does not keep the memory
    alive: hold the _HostRef it came from."""
    return None if not address else ctypes.cast(c_void_p(address), POINTER(c_uint32))


class _U32Column:
    """u32 values as C reads them: ref (address and what keeps the memory
    alive), count, data (a 1-D container of the values) and whether they came
    from numpy."""

    __slots__ = ("ref", "count", "data", "numpy")

    def __init__(self, ref, count, data, numpy):
        self.ref = ref
        self.count = count
        self.data = data
        self.numpy = numpy

    def pointer(self):
        return _u32_pointer(self.ref.address)

    def max(self):
        """The largest value, or -1 for no values."""
        if self.count == 0:
            return -1
        return int(self.data.max()) if self.numpy else max(self.data)


def _u32_column(values, what):
    """values (a sequence of ints, array.array("I"), a u32 memoryview or a
    numpy integer array) as a _U32Column. Native u32 memory is read in place
    when writable (else copied once); anything else is converted, each value
    checked to fit 32 unsigned bits."""
    if _is_numpy_array(values):
        import numpy as np
        a = np.asarray(values).reshape(-1)
        if a.dtype != np.uint32:
            if a.dtype.kind not in "ui":
                raise TypeError(f"{what}: a numpy array of {a.dtype}. Fix: pass integer values "
                                f"(a numpy.uint32 array is used without a copy).")
            if a.size and (int(a.min()) < 0 or int(a.max()) > _U32_MAX):
                raise ValueError(f"{what}: values outside [0, 2**32). Fix: pass u32 values.")
            a = a.astype(np.uint32)
        a = np.ascontiguousarray(a)
        return _U32Column(_readable(a, what), int(a.size), a, True)
    try:
        view = memoryview(values)
    except TypeError:
        view = None
    if (view is not None and view.ndim == 1 and view.itemsize == 4
            and view.format in _U32_FORMATS):
        return _U32Column(_readable(values, what), len(view), view, False)
    try:
        items = iter(values)
    except TypeError:
        raise TypeError(f"{what}: {type(values).__name__} is not a sequence of integers. Fix: "
                        f"pass a list, array.array('I') or numpy array of u32 values.") from None
    out = _array.array(_U32_CODE)
    for i, v in enumerate(items):
        try:
            v = operator.index(v)
        except TypeError:
            raise TypeError(f"{what}[{i}] is {type(v).__name__}, not an integer. Fix: pass "
                            f"integer u32 values.") from None
        if not 0 <= v <= _U32_MAX:
            raise ValueError(f"{what}[{i}] = {v} is outside [0, 2**32). Fix: pass u32 values.")
        out.append(v)
    return _U32Column(_readable(out, what), len(out), out, False)


def _union_words(unions, what):
    """Unions as a _U32Column of 2 class ids each: a sequence of (a, b)
    pairs, or flat u32 memory / a numpy array (shape (n, 2) or 2n values)."""
    if unions is None:
        unions = ()
    flat = _is_numpy_array(unions)
    if not flat:
        try:
            view = memoryview(unions)
            flat = view.itemsize == 4 and view.format in _U32_FORMATS
        except TypeError:
            pass
    if flat:
        col = _u32_column(unions, what)
        if col.count % 2:
            raise ValueError(f"{what}: {col.count} class ids, not pairs. Fix: pass 2 class ids "
                             f"per union.")
        return col
    try:
        items = iter(unions)
    except TypeError:
        raise TypeError(f"{what}: {type(unions).__name__} is not a sequence of pairs. Fix: pass "
                        f"unions as (a, b) pairs of class ids, e.g. [(0, 1)].") from None
    words = []
    for i, pair in enumerate(items):
        try:
            a, b = pair
        except (TypeError, ValueError):
            raise TypeError(f"{what}[{i}] is {pair!r}, not a pair of class ids. Fix: pass "
                            f"unions as (a, b) pairs, e.g. [(0, 1)].") from None
        words += (a, b)
    return _u32_column(words, what)


_ROW_COLUMNS = ("row_classes", "row_ops", "child_offsets", "child_lengths", "row_signatures",
                "children")


def _row_columns(what, row_classes, row_ops, child_offsets, child_lengths, children,
                 row_signatures):
    """The columns as {name: _U32Column} (row_signatures only when given),
    every row column checked to have one entry per row."""
    cols = {}
    for name, values in zip(_ROW_COLUMNS, (row_classes, row_ops, child_offsets, child_lengths,
                                           row_signatures, children)):
        if values is not None or name != "row_signatures":
            cols[name] = _u32_column(values, f"{what} {name}")
    rows = cols["row_classes"].count
    for name in ("row_ops", "child_offsets", "child_lengths", "row_signatures"):
        if name in cols and cols[name].count != rows:
            raise ValueError(f"{what}: {name} has {cols[name].count} entries but row_classes "
                             f"has {rows}. Fix: pass one entry per row in every row column.")
    return cols


def _node_columns(nodes, what):
    """(class, op, children) nodes as the five columns, children laid out in
    row order from offset 0."""
    row_classes: List[int] = []
    row_ops: List[int] = []
    offsets: List[int] = []
    lengths: List[int] = []
    children: List[int] = []
    for i, node in enumerate(nodes):
        try:
            klass, op, kids = node
            kids = list(kids)
        except (TypeError, ValueError):
            raise TypeError(f"{what}: node {i} is {node!r}. Fix: give each node as (class, op, "
                            f"children), children a sequence of class ids.") from None
        row_classes.append(klass)
        row_ops.append(op)
        offsets.append(len(children))
        lengths.append(len(kids))
        children.extend(kids)
    return row_classes, row_ops, offsets, lengths, children


def _egraph_device(device, context):
    if device is None:
        return EgraphDevice.GPU if context is not None else EgraphDevice.CPU
    if isinstance(device, str):
        try:
            return EgraphDevice[device.upper()]
        except KeyError:
            raise ValueError(f"unknown e-graph device {device!r}. Fix: use \"gpu\" (with a "
                             f"Context) or \"cpu\".") from None
    device = operator.index(device)
    if not -2 ** 31 <= device < 2 ** 31:
        raise ValueError(f"e-graph device {device} does not fit the C enum. Fix: use "
                         f"EgraphDevice.GPU or EgraphDevice.CPU.")
    return device  # any other value: the library says what is wrong


def _egraph_column(column):
    if isinstance(column, str):
        try:
            return EgraphColumn[column.upper()]
        except KeyError:
            raise ValueError(f"unknown e-graph column {column!r}. Fix: use one of "
                             f"{[c.name.lower() for c in EgraphColumn]}.") from None
    column = operator.index(column)
    if not -2 ** 31 <= column < 2 ** 31:
        raise ValueError(f"e-graph column {column} does not fit the C enum. Fix: use an "
                         f"EgraphColumn value.")
    try:
        return EgraphColumn(column)
    except ValueError:
        return column  # the library refuses it with its own message


class EgraphRebuildResult:
    """What a rebuild did (vyre_egraph_rebuild_result), with its canonical
    classes.

    rounds: passes run, the last of which found nothing (unless max_rounds
      stopped the rebuild first);
    merges / union_merges: classes merged by congruence / by the unions given;
    classes_before / classes_after: distinct canonical classes before the
      unions and after the rebuild;
    rows_visited: row visits over all rounds (a full round visits every row,
      an incremental one the rows appended since the last rebuild and those
      with a child whose class was merged);
    device_ns (device_timing, GPU images) and wall_ns: times;
    changed_class_count: classes whose canonical class this rebuild changed,
      its unions included (EgraphImage.changed_pairs() lists them);
    full_rounds: rounds that visited every row (0 for a rebuild that was
      incremental throughout);
    canonical: the canonical class of every class (a list, a numpy array for
      a numpy image, or the buffer passed as canonical), None if not asked;
    timing: for an asynchronous rebuild, the Pending's timing dict.
    """

    _FIELDS = ("rounds", "merges", "union_merges", "classes_before", "classes_after",
               "rows_visited", "device_ns", "wall_ns", "changed_class_count", "full_rounds")
    __slots__ = _FIELDS + ("canonical", "timing")

    def __init__(self, result: Any, canonical: Any = None) -> None:
        for name in self._FIELDS:
            setattr(self, name, getattr(result, name))
        self.canonical = canonical
        self.timing = None

    def as_dict(self) -> Dict[str, int]:
        """The counts and times as a dict (without canonical and timing)."""
        return {name: getattr(self, name) for name in self._FIELDS}

    def __repr__(self):
        fields = ", ".join(f"{name}={getattr(self, name)}" for name in self._FIELDS)
        return f"EgraphRebuildResult({fields})"


class EgraphImage(_Object):
    """An e-graph's e-nodes ("rows") as u32 columns and a union-find over its
    e-classes (vyre_egraph_image), on a GPU or in the library's CPU reference.

    Row r is the e-node row_ops[r] applied to the classes
    children[child_offsets[r] : child_offsets[r] + child_lengths[r]], in
    e-class row_classes[r]; each row's children come after the previous
    row's. Op ids carry leaf payloads (Const(1) and Const(2) are different
    ops). Rows are congruent when they have the same op, the same arity and,
    child by child, the same canonical class; the canonical class of c is the
    minimum class id of c's set.

    Columns are sequences of ints, array.array("I") or numpy integer arrays
    (uint32 ones are read without a copy). The image copies them: change it
    with write(). from_nodes() builds the columns from (class, op, children)
    tuples.

    class_count: the number of e-classes (every id is below it); None: one
      more than the largest id in row_classes and children.
    device: "gpu" (on `context`'s GPU), "cpu" (no context, no driver), or
      None: "gpu" when a context is given, else "cpu".
    cpu_threads: CPU images: worker threads (0 = every core, 1 = one).
    row_signatures: optional per-row u32 values kept with the columns; they
      never affect which rows merge.
    numpy: read() and rebuild() return numpy arrays (else lists); None: when
      any column given is a numpy array.
    row_capacity, class_capacity, child_capacity: optional room reserved for
      append() (0, or less than the count, means exactly the count); appends
      past the capacity grow it to the next power of two of what they need.

    Every class starts alone; rebuild() merges, and the image keeps its
    union-find for the next rebuild. append() grows the image in place (a
    saturation loop: match, append e-nodes, rebuild with the unions found,
    repeat), and changed_pairs() lists the classes the last rebuild moved. A
    GPU image belongs to its Context: closing the context releases it.
    """

    _handle_type = EgraphImageHandle
    _destroy = "vyre_egraph_image_destroy"
    # Defaults, so a closed or half-built image still reports INVALID_HANDLE.
    row_count = class_count = child_count = 0
    device = None
    numpy = False

    def __init__(self, row_classes: Any, row_ops: Any, child_offsets: Any, child_lengths: Any,
                 children: Any, class_count: Optional[int] = None,
                 device: Union[EgraphDevice, str, None] = None,
                 context: Optional[Context] = None, cpu_threads: int = 0,
                 row_signatures: Any = None, numpy: Optional[bool] = None,
                 row_capacity: int = 0, class_capacity: int = 0,
                 child_capacity: int = 0) -> None:
        device = _egraph_device(device, context)
        if device == EgraphDevice.GPU and context is None:
            raise ValueError("EgraphImage: a GPU image needs a Context. Fix: pass "
                             "context=vc.Context(), or device=\"cpu\" for the CPU reference.")
        super().__init__(0, context)
        cols = _row_columns("EgraphImage", row_classes, row_ops, child_offsets, child_lengths,
                            children, row_signatures)
        rows = cols["row_classes"].count
        if class_count is None:
            class_count = max(cols["row_classes"].max(), cols["children"].max()) + 1
        desc = _new(EgraphImageDescStruct, device=device, row_count=rows,
                    class_count=_unsigned(class_count, 64, "class_count"),
                    child_count=cols["children"].count,
                    cpu_threads=_unsigned(cpu_threads, 32, "cpu_threads"),
                    row_capacity=_unsigned(row_capacity, 64, "row_capacity"),
                    class_capacity=_unsigned(class_capacity, 64, "class_capacity"),
                    child_capacity=_unsigned(child_capacity, 64, "child_capacity"))
        if context is not None:
            desc.context = context._h()
        for name, col in cols.items():
            setattr(desc, name, col.pointer())
        handle = EgraphImageHandle()
        _call("vyre_egraph_image_create", byref(desc), byref(handle))
        self._bits = handle.bits
        self.device = EgraphDevice(int(device))
        self.row_count = rows
        self.class_count = desc.class_count
        self.child_count = desc.child_count
        self.numpy = (any(col.numpy for col in cols.values()) if numpy is None
                      else bool(numpy))

    @classmethod
    def from_nodes(cls, nodes: Iterable[Tuple[int, int, Iterable[int]]],
                   **kwargs: Any) -> "EgraphImage":
        """An image of one row per node, each (class, op, children) with
        children a sequence of class ids (empty for a leaf), laid out in row
        order. Other arguments as for EgraphImage."""
        return cls(*_node_columns(nodes, "EgraphImage.from_nodes"), **kwargs)

    @property
    def context(self) -> Optional[Context]:
        """The Context of a GPU image; None for a CPU image."""
        return self._context

    def _entries(self, column):
        if column == EgraphColumn.CHILDREN:
            return self.child_count
        if column == EgraphColumn.CANONICAL_CLASSES:
            return self.class_count
        if column in (EgraphColumn.ROW_CLASSES, EgraphColumn.ROW_OPS,
                      EgraphColumn.CHILD_OFFSETS, EgraphColumn.CHILD_LENGTHS,
                      EgraphColumn.ROW_SIGNATURES):
            return self.row_count
        return 0

    def _new_u32(self, count):
        """count zeroed u32 entries: a numpy array for a numpy image."""
        if self.numpy:
            import numpy as np
            return np.zeros(count, dtype=np.uint32)
        return _array.array(_U32_CODE, bytes(4 * count))

    def _deliver(self, data):
        return data if self.numpy else data.tolist()

    def read(self, column: Union[EgraphColumn, str, int], first: int = 0,
             count: Optional[int] = None, out: Any = None) -> Any:
        """Entries [first, first + count) of a column: an EgraphColumn or its
        name ("row_classes", "row_ops", "child_offsets", "child_lengths",
        "row_signatures", "children", "canonical_classes"); count None: to
        the end of the column.

        Returns a list (a numpy uint32 array for a numpy image), or fills and
        returns `out`, a writable u32 buffer (array.array("I"), numpy.uint32
        array) with room for count entries (count None: as many as it holds)."""
        column = _egraph_column(column)
        first = _unsigned(first, 64, "first")
        if out is None:
            if count is None:
                count = max(self._entries(column) - first, 0)
            data = self._new_u32(_unsigned(count, 64, "count"))
        else:
            data = out
        dst = _writable(data, "EgraphImage.read out")
        room = dst.nbytes // 4
        count = room if count is None else _unsigned(count, 64, "count")
        if count > room:
            raise ValueError(f"EgraphImage.read: out holds {room} u32 entries but count is "
                             f"{count}. Fix: pass a larger out, or a smaller count.")
        _call("vyre_egraph_image_read", self._h(), int(column), first, count,
              _u32_pointer(dst.address))
        del dst
        return out if out is not None else self._deliver(data)

    def canonical_classes(self) -> Any:
        """The canonical class of every class (the image's union-find now)."""
        return self.read(EgraphColumn.CANONICAL_CLASSES)

    def write(self, column: Union[EgraphColumn, str, int], values: Any,
              first: int = 0) -> None:
        """Overwrites entries [first, first + len(values)) of a row column or
        of the children (not canonical_classes) in place. The library checks
        the rows affected as at creation (class ids below class_count, child
        ranges in row order) and changes nothing when they are wrong."""
        column = _egraph_column(column)
        col = _u32_column(values, "EgraphImage.write values")
        _call("vyre_egraph_image_write", self._h(), int(column), _unsigned(first, 64, "first"),
              col.count, col.pointer())

    def info(self) -> Dict[str, Any]:
        """dict(device, context, row_count, class_count, child_count,
        canonical_class_count, bytes, row_capacity, class_capacity,
        child_capacity, changed_class_count); see vyre_egraph_image_info.
        context is the Context's handle (0 for a CPU image); bytes the device
        (GPU) or host (CPU) memory the image holds; the capacities what it
        holds before an append must grow it; changed_class_count the classes
        whose canonical class the last rebuild changed."""
        info = _new(EgraphImageInfoStruct)
        _call("vyre_egraph_image_info_get", self._h(), byref(info))
        d = _struct_dict(info)
        try:
            d["device"] = EgraphDevice(info.device)
        except ValueError:
            pass
        return d

    def append(self, row_classes: Any, row_ops: Any, child_offsets: Any, child_lengths: Any,
               children: Any, class_count: Optional[int] = None,
               row_signatures: Any = None) -> None:
        """Appends rows (e-nodes) and class_count new classes in place
        (vyre_egraph_image_append). Columns as for EgraphImage; child_offsets
        index these `children` (from 0, in row order). The new classes are
        numbered from the image's class_count on, each alone; rows and
        children may name any class below class_count + the new count.
        class_count None: as many new classes as the largest id named needs.

        The union-find and the canonical classes are kept; the next rebuild
        visits the new rows. The rows are checked as at creation, and a
        refused append (VyreError) changes nothing. Within the image's
        capacity only the new rows are copied; past it the image grows."""
        _require("vyre_egraph_image_append", "EgraphImage.append")
        cols = _row_columns("EgraphImage.append", row_classes, row_ops, child_offsets,
                            child_lengths, children, row_signatures)
        if class_count is None:
            named = max(cols["row_classes"].max(), cols["children"].max()) + 1
            class_count = max(named - self.class_count, 0)
        desc = _new(EgraphAppendDescStruct,
                    class_count=_unsigned(class_count, 64, "class_count"),
                    row_count=cols["row_classes"].count, child_count=cols["children"].count)
        for name, col in cols.items():
            setattr(desc, name, col.pointer())
        _call("vyre_egraph_image_append", self._h(), byref(desc))
        del cols
        self.row_count += desc.row_count
        self.class_count += desc.class_count
        self.child_count += desc.child_count

    def append_nodes(self, nodes: Iterable[Tuple[int, int, Iterable[int]]],
                     class_count: Optional[int] = None) -> None:
        """append() of one row per (class, op, children) node, as
        from_nodes() lays them out."""
        self.append(*_node_columns(nodes, "EgraphImage.append_nodes"), class_count=class_count)

    def _pairs_into(self, function, capacity):
        # Never NULL: NULL with capacity 0 would only ask the count.
        pairs = (c_uint32 * max(2 * capacity, 2))()
        count = c_uint64()
        _call(function, self._h(), pairs, capacity, byref(count))
        return [(pairs[2 * i], pairs[2 * i + 1]) for i in range(count.value)]

    def _pairs(self, function, capacity, count):
        if capacity is not None:
            return self._pairs_into(function, _unsigned(capacity, 64, "capacity"))
        for attempt in range(4):
            try:
                return self._pairs_into(function, count())
            except VyreError as e:
                # Another thread changed the image between the count and the
                # fetch: ask again.
                if e.status != Status.OUT_OF_RANGE or attempt == 3:
                    raise
        raise AssertionError("unreachable")

    def changed_count(self) -> int:
        """How many pairs changed_pairs() would return now."""
        _require("vyre_egraph_changed_read", "EgraphImage.changed_count")
        count = c_uint64()
        _call("vyre_egraph_changed_read", self._h(), None, 0, byref(count))
        return count.value

    def changed_pairs(self, capacity: Optional[int] = None) -> List[Tuple[int, int]]:
        """The classes whose canonical class the last rebuild changed
        (vyre_egraph_changed_read): pairs (class, new canonical class),
        sorted by class, so an e-matcher updates its indices from them
        alone. A rebuild with reset=True starts from every class alone;
        appended classes start alone.

        capacity None asks the count first, then fetches. An int passes room
        for that many pairs: fewer than the rebuild changed raises
        VyreError(OUT_OF_RANGE), whose message names the room needed."""
        _require("vyre_egraph_changed_read", "EgraphImage.changed_pairs")
        return self._pairs("vyre_egraph_changed_read", capacity, self.changed_count)

    def pass_count(self) -> int:
        """How many pairs pass_pairs() would return now."""
        count = c_uint64()
        _call("vyre_egraph_pass", self._h(), None, 0, byref(count))
        return count.value

    def pass_pairs(self, capacity: Optional[int] = None) -> List[Tuple[int, int]]:
        """One congruence pass, merging nothing: the pairs (left, right) of
        canonical classes, left < right, sorted and deduplicated, that
        congruent rows put in different classes. Each group of congruent rows
        gives (m, c) for its minimum canonical class m and every other class
        c in it.

        capacity None asks the count first, then fetches. An int passes room
        for that many pairs: fewer than the pass finds raises
        VyreError(OUT_OF_RANGE), whose message names the room needed."""
        return self._pairs("vyre_egraph_pass", capacity, self.pass_count)

    def _rebuild_desc(self, unions, reset, max_rounds, colliding_hash, device_timing,
                      canonical, what, device_rounds=False):
        """Returns (desc, keep, collect): keep holds the memory C uses,
        collect() the canonical classes once written."""
        flags = ((EGRAPH_REBUILD_RESET if reset else 0)
                 | (EGRAPH_REBUILD_DEVICE_TIMING if device_timing else 0)
                 | (EGRAPH_REBUILD_COLLIDING_HASH if colliding_hash else 0)
                 | (EGRAPH_REBUILD_DEVICE_ROUNDS if device_rounds else 0))
        words = _union_words(unions, f"{what} unions")
        desc = _new(EgraphRebuildDescStruct, flags=flags, union_count=words.count // 2,
                    max_rounds=_unsigned(max_rounds, 32, "max_rounds"))
        desc.unions = words.pointer()
        keep = [words]
        if canonical is None or canonical is False:
            return desc, keep, lambda: None
        if canonical is True:
            data = self._new_u32(self.class_count)
            collect = lambda: self._deliver(data)  # noqa: E731
        elif isinstance(canonical, int):
            raise TypeError(f"{what}: canonical={canonical!r}. Fix: pass True, False or a "
                            f"writable u32 buffer of class_count entries.")
        else:
            data = canonical
            collect = lambda: data  # noqa: E731
        ref = _writable(data, f"{what} canonical")
        if ref.nbytes < 4 * self.class_count:
            raise ValueError(f"{what}: canonical holds {ref.nbytes // 4} u32 entries, the image "
                             f"has {self.class_count} classes. Fix: pass room for class_count "
                             f"entries.")
        desc.canonical_out = _u32_pointer(ref.address)
        keep.append(ref)
        return desc, keep, collect

    def rebuild(self, unions: Any = (), reset: bool = False, max_rounds: int = 0,
                colliding_hash: bool = False, device_timing: bool = False,
                canonical: Any = True, device_rounds: bool = False) -> EgraphRebuildResult:
        """Merges `unions` (pairs (a, b) of class ids, e.g. what e-matching
        found; or flat u32 memory of 2 ids each), then merges congruent
        classes round after round until a pass finds nothing (the congruence
        closure), and waits.

        reset: start from every class alone instead of the image's state.
        max_rounds: stop after that many rounds even without a fixpoint
          (0: no limit); the next rebuild goes on from there.
        colliding_hash: testing: group rows by op and arity only; every
          candidate is still confirmed child by child, so results are equal.
        device_timing: GPU images: report device_ns.
        device_rounds: GPU images: every round on the device in one launch
          of a loop graph that stops at the fixpoint (a CUDA 12.4 driver);
          pays on rebuilds of many rounds. Same results.
        canonical: True: result.canonical is the canonical class of every
          class (a list, a numpy array for a numpy image); False: not read;
          or a writable u32 buffer of class_count entries to fill.

        Returns an EgraphRebuildResult."""
        desc, keep, collect = self._rebuild_desc(unions, reset, max_rounds, colliding_hash,
                                                 device_timing, canonical,
                                                 "EgraphImage.rebuild", device_rounds)
        result = _new(EgraphRebuildResultStruct)
        _call("vyre_egraph_rebuild", self._h(), byref(desc), byref(result))
        del keep
        return EgraphRebuildResult(result, collect())

    def rebuild_async(self, unions: Any = (), reset: bool = False, max_rounds: int = 0,
                      colliding_hash: bool = False, device_timing: bool = False,
                      canonical: Any = True, device_rounds: bool = False) -> Pending:
        """Starts a rebuild (arguments as for rebuild()) and returns a Pending
        at once; its wait() returns the EgraphRebuildResult (with .timing).
        The unions are read before this returns. Until the wait, every other
        call on the image raises VyreError(INVALID_STATE); closing the Pending
        unwaited finishes the rebuild without reading its results. A CPU
        image's rebuild runs to completion inside this call."""
        desc, keep, collect = self._rebuild_desc(unions, reset, max_rounds, colliding_hash,
                                                 device_timing, canonical,
                                                 "EgraphImage.rebuild_async", device_rounds)
        result = _new(EgraphRebuildResultStruct)
        desc.result_out = ctypes.pointer(result)
        handle = PendingHandle()
        _call("vyre_egraph_rebuild_async", self._h(), byref(desc), byref(handle))
        # The result and the canonical classes are written by the wait.
        keep.append(result)
        return Pending(handle.bits, self, keep, None,
                       finish=lambda: EgraphRebuildResult(result, collect()))
