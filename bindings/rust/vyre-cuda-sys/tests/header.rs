//! Checks the hand-written declarations of this crate against
//! include/vyre_cuda.h (or `$VYRE_CUDA_INCLUDE_DIR/vyre_cuda.h`):
//!  - every `VYRE_API` function is declared in src/lib.rs with the same
//!    parameter count, parameter types and return type, and resolves in the
//!    library the loader loads (from the file the build script found, when
//!    VYRE_CUDA_LIBRARY is not set);
//!  - every enumerator and `#define`d constant has the header's value;
//!  - every struct has the C compiler's size, alignment, field names in
//!    order, field offsets and sizes, and its `Default` equals the
//!    `VYRE_*_INIT` macro byte for byte (a C program built with `$CC`, else
//!    `cc`, prints what the compiler knows).

use std::collections::{BTreeMap, BTreeSet};
use std::mem::{align_of, offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

use vyre_cuda_sys as sys;

fn include_dir() -> PathBuf {
    match std::env::var_os("VYRE_CUDA_INCLUDE_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../include"),
    }
}

fn header_text() -> String {
    let path = include_dir().join("vyre_cuda.h");
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("cannot read {}: {e}. Fix: set VYRE_CUDA_INCLUDE_DIR to the directory holding vyre_cuda.h", path.display())
    })
}

/// The text without /* */ and // comments.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (None, None) => {
                out.push_str(rest);
                return out;
            }
            (Some(b), l) if l.map_or(true, |l| b < l) => {
                out.push_str(&rest[..b]);
                let end = rest[b + 2..].find("*/").expect("unterminated comment") + b + 4;
                out.push(' ');
                rest = &rest[end..];
            }
            (_, Some(l)) => {
                out.push_str(&rest[..l]);
                rest = &rest[l..];
                rest = &rest[rest.find('\n').unwrap_or(rest.len())..];
            }
            _ => unreachable!(),
        }
    }
}

/// The text without preprocessor lines (continuations included).
fn without_preprocessor(text: &str) -> String {
    let mut out = String::new();
    let mut continued = false;
    for line in text.lines() {
        let directive = continued || line.trim_start().starts_with('#');
        continued = directive && line.trim_end().ends_with('\\');
        if !directive {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A C type (with or without a parameter name) in Rust spelling.
fn c_type_to_rust(decl: &str, has_name: bool) -> String {
    let depth = decl.matches('*').count();
    let cleaned = decl.replace('*', " ");
    let mut tokens: Vec<&str> = cleaned.split_whitespace().collect();
    let is_const = tokens.first() == Some(&"const");
    tokens.retain(|t| *t != "const");
    if has_name && tokens.len() > 1 {
        tokens.pop();
    }
    assert_eq!(tokens.len(), 1, "cannot read the C type {decl:?}");
    let base = match tokens[0] {
        "uint32_t" => "u32",
        "uint64_t" => "u64",
        "int32_t" => "i32",
        "size_t" => "usize",
        "char" => "c_char",
        "void" => "c_void",
        other => other,
    };
    let mut ty = base.to_string();
    for level in 0..depth {
        let innermost = level == 0;
        ty = format!(
            "{}{}",
            if innermost && is_const {
                "*const "
            } else {
                "*mut "
            },
            ty
        );
    }
    ty
}

struct Function {
    params: Vec<String>,
    ret: String,
}

/// The header's VYRE_API functions: name -> parameter and return types.
fn header_functions(text: &str) -> BTreeMap<String, Function> {
    let text = without_preprocessor(&strip_comments(text));
    let mut out = BTreeMap::new();
    for piece in text.split("VYRE_API").skip(1) {
        let decl = &piece[..piece.find(';').expect("declaration without ';'")];
        let open = decl.find('(').unwrap();
        let close = decl.rfind(')').unwrap();
        let head = squash(&decl[..open]);
        let (ret, name) = head
            .rsplit_once(' ')
            .expect("function without a return type");
        let params_text = squash(&decl[open + 1..close]);
        let params = if params_text == "void" || params_text.is_empty() {
            Vec::new()
        } else {
            params_text
                .split(',')
                .map(|p| c_type_to_rust(p.trim(), true))
                .collect()
        };
        out.insert(
            name.to_string(),
            Function {
                params,
                ret: c_type_to_rust(ret, false),
            },
        );
    }
    out
}

fn rust_type(ty: &str) -> String {
    squash(
        &ty.replace("core::ffi::", "")
            .replace("* const", "*const")
            .replace("* mut", "*mut"),
    )
}

/// The functions declared in this crate's `functions!` list (written like an
/// extern block), read from its source.
fn rust_functions() -> BTreeMap<String, Function> {
    // Embedded at compile time, so the test binary also runs where the
    // source tree is elsewhere (staged for the GPU machine).
    let source = strip_comments(include_str!("../src/lib.rs"));
    let block = &source[source.find("functions! {").expect("no functions! list")..];
    let mut out = BTreeMap::new();
    for piece in block.split("pub fn ").skip(1) {
        let open = piece.find('(').unwrap();
        let name = piece[..open].trim().to_string();
        let close = piece.find(')').unwrap();
        let params = piece[open + 1..close]
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| rust_type(p.split_once(':').expect("parameter without a type").1))
            .collect();
        let tail = &piece[close + 1..piece.find(';').unwrap()];
        let ret = tail
            .trim()
            .strip_prefix("->")
            .map(rust_type)
            .unwrap_or_else(|| "()".into());
        out.insert(name, Function { params, ret });
    }
    out
}

#[test]
fn every_header_function_is_declared_with_its_types() {
    let header = header_functions(&header_text());
    assert!(
        header.len() > 40,
        "only {} functions found in the header",
        header.len()
    );
    let rust = rust_functions();
    let missing: Vec<_> = header.keys().filter(|n| !rust.contains_key(*n)).collect();
    let extra: Vec<_> = rust.keys().filter(|n| !header.contains_key(*n)).collect();
    assert!(
        missing.is_empty(),
        "declared in vyre_cuda.h but not in vyre-cuda-sys: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "declared in vyre-cuda-sys but not in vyre_cuda.h: {extra:?}"
    );
    for (name, c) in &header {
        let r = &rust[name];
        assert_eq!(r.params.len(), c.params.len(), "{name}: parameter count");
        assert_eq!(r.params, c.params, "{name}: parameter types");
        assert_eq!(r.ret, c.ret, "{name}: return type");
    }
}

/// Every function by address (each a wrapper calling through the table the
/// loader fills).
macro_rules! addresses {
    ($($f:ident),* $(,)?) => {
        vec![$((stringify!($f), sys::$f as *const () as usize)),*]
    };
}

#[test]
fn every_function_resolves() {
    // load() resolves every function of the list or fails naming the first
    // one missing, and checks the major version.
    let path = sys::load().unwrap_or_else(|why| panic!("{why}"));
    eprintln!("loaded {path}");
    if std::env::var_os("VYRE_CUDA_LIBRARY").map_or(true, |v| v.is_empty()) {
        if let Some(built) = sys::BUILD_LIBRARY {
            // Without VYRE_CUDA_LIBRARY, the file the build script found.
            let built = std::fs::canonicalize(built).unwrap();
            assert_eq!(std::path::Path::new(path), built, "the library loaded");
        }
    }
    let linked = addresses!(
        vyre_version,
        vyre_status_name,
        vyre_last_error,
        vyre_last_error_log,
        vyre_set_log_callback,
        vyre_device_count,
        vyre_device_info_get,
        vyre_device_can_access_peer,
        vyre_context_create,
        vyre_context_destroy,
        vyre_context_device_info,
        vyre_context_telemetry,
        vyre_context_trim,
        vyre_context_selftest,
        vyre_buffer_alloc,
        vyre_buffer_free,
        vyre_buffer_upload,
        vyre_buffer_download,
        vyre_buffer_upload_ranges,
        vyre_buffer_download_ranges,
        vyre_buffer_info_get,
        vyre_buffer_copy,
        vyre_buffer_copy_async,
        vyre_buffer_export_ipc,
        vyre_buffer_import_ipc,
        vyre_buffer_wrap,
        vyre_context_wait_stream,
        vyre_context_signal_stream,
        vyre_host_alloc,
        vyre_host_free,
        vyre_host_register,
        vyre_host_unregister,
        vyre_program_create,
        vyre_program_destroy,
        vyre_dispatch,
        vyre_dispatch_async,
        vyre_pending_poll,
        vyre_pending_wait,
        vyre_pending_timing,
        vyre_pending_release,
        vyre_graph_record,
        vyre_graph_replay,
        vyre_graph_replay_async,
        vyre_graph_destroy,
        vyre_graph_info_get,
        vyre_graph_launch,
        vyre_graph_node_kind_get,
        vyre_graph_node_info_get,
        vyre_graph_node_info_set,
        vyre_graph_kernel_node_update,
        vyre_capture_begin,
        vyre_capture_dispatch,
        vyre_capture_end,
        vyre_graph_loop_create,
        vyre_sequence_create,
        vyre_sequence_run,
        vyre_sequence_record,
        vyre_sequence_destroy,
        vyre_egraph_image_create,
        vyre_egraph_image_destroy,
        vyre_egraph_image_read,
        vyre_egraph_image_write,
        vyre_egraph_image_info_get,
        vyre_egraph_pass,
        vyre_egraph_rebuild,
        vyre_egraph_rebuild_async,
        vyre_egraph_image_append,
        vyre_egraph_changed_read,
    );
    let names: BTreeSet<String> = linked.iter().map(|(n, _)| n.to_string()).collect();
    let header: BTreeSet<String> = header_functions(&header_text()).into_keys().collect();
    assert_eq!(
        names, header,
        "the address list differs from the header's functions"
    );
    for (name, address) in linked {
        assert_ne!(address, 0, "{name}");
    }
    let v = unsafe { sys::vyre_version() };
    assert_eq!(
        sys::vyre_version_major_of(v),
        sys::VYRE_CUDA_VERSION_MAJOR,
        "library major version"
    );
}

// ---------------------------------------------------------------------------
// Constants, structs: what the C compiler says
// ---------------------------------------------------------------------------

/// `typedef struct NAME { fields } NAME;` of the header: name -> field names.
fn header_structs(text: &str) -> BTreeMap<String, Vec<String>> {
    let text = strip_comments(text);
    let mut out = BTreeMap::new();
    for piece in text.split("typedef struct ").skip(1) {
        let open = piece.find('{').unwrap();
        let name = piece[..open].trim().to_string();
        let close = piece.find('}').unwrap();
        let fields = piece[open + 1..close]
            .split(';')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(|f| {
                let f = f.split('[').next().unwrap();
                f.rsplit(|c: char| c.is_whitespace() || c == '*')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect();
        out.insert(name, fields);
    }
    out
}

/// Enumerators (`NAME = value` lines) and the `#define`d numeric constants.
fn header_constants(text: &str) -> BTreeSet<String> {
    let text = strip_comments(text);
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some((name, _)) = line.split_once('=') {
            let name = name.trim();
            if name.starts_with("VYRE_")
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                out.insert(name.to_string());
            }
        }
    }
    for name in [
        "VYRE_CUDA_VERSION_MAJOR",
        "VYRE_CUDA_VERSION_MINOR",
        "VYRE_CUDA_VERSION_PATCH",
        "VYRE_CUDA_VERSION",
        "VYRE_WAIT_FOREVER",
        "VYRE_IPC_HANDLE_BYTES",
        "VYRE_GRAPH_NODE_MAX_ARGUMENTS",
    ] {
        assert!(
            text.contains(&format!("#define {name}")),
            "{name} is not defined in the header"
        );
        out.insert(name.to_string());
    }
    out
}

/// The `VYRE_*_INIT` macro of a struct (vyre_device_info -> VYRE_DEVICE_INFO_INIT).
fn init_macro(text: &str, name: &str) -> Option<String> {
    let macro_name = format!("{}_INIT", name.to_uppercase());
    text.contains(&format!("#define {macro_name} "))
        .then_some(macro_name)
}

struct Layout {
    size: usize,
    align: usize,
    fields: Vec<(&'static str, usize, usize)>,
    /// Each field's bytes in `Default::default()`, when the type has one.
    init: Option<Vec<Vec<u8>>>,
}

fn field_size<S, F>(_: fn(&S) -> &F) -> usize {
    size_of::<F>()
}

fn field_bytes<S, F>(s: &S, get: fn(&S) -> &F) -> Vec<u8> {
    let f = get(s);
    // Fields hold integers, arrays of them, pointers and handle structs of
    // one u64: no padding inside a field.
    unsafe { std::slice::from_raw_parts(f as *const F as *const u8, size_of::<F>()).to_vec() }
}

macro_rules! init_of {
    (default, $s:ident, [$($f:ident),*]) => {{
        let d = <sys::$s as Default>::default();
        Some(vec![$(field_bytes(&d, |s: &sys::$s| &s.$f)),*])
    }};
    (, $s:ident, [$($f:ident),*]) => { None };
}

macro_rules! layouts {
    ($($s:ident $(: $default:ident)? { $($f:ident),* $(,)? })*) => {{
        let mut out = BTreeMap::new();
        $(
            out.insert(stringify!($s).to_string(), Layout {
                size: size_of::<sys::$s>(),
                align: align_of::<sys::$s>(),
                fields: vec![$((stringify!($f), offset_of!(sys::$s, $f), field_size(|s: &sys::$s| &s.$f))),*],
                init: init_of!($($default)?, $s, [$($f),*]),
            });
        )*
        out
    }};
}

fn rust_layouts() -> BTreeMap<String, Layout> {
    layouts! {
        vyre_context: default { bits }
        vyre_buffer: default { bits }
        vyre_program: default { bits }
        vyre_pending: default { bits }
        vyre_graph: default { bits }
        vyre_sequence: default { bits }
        vyre_egraph_image: default { bits }
        vyre_device_info: default {
            struct_size, ordinal, name, compute_capability_major, compute_capability_minor,
            total_memory_bytes, multiprocessor_count, max_threads_per_block, max_block_dim,
            max_grid_dim, max_shared_memory_per_block, warp_size, cooperative_launch, driver_version,
            peer_access_mask,
        }
        vyre_context_desc: default {
            struct_size, device_ordinal, transient_pool_limit_bytes, pinned_pool_limit_bytes,
            staging_chunk_bytes, staging_chunk_count, staging_threads,
        }
        vyre_telemetry: default {
            struct_size, reserved0, h2d_bytes, h2d_operations, d2h_bytes, d2h_operations,
            memset_operations, kernel_launches, sync_points, dispatches, transient_pool_hits,
            transient_pool_misses, transient_pool_cached_bytes, pinned_pool_hits, pinned_pool_misses,
            pinned_pool_cached_bytes, module_cache_hits, module_cache_misses, module_loads,
            device_bytes_live, pinned_bytes_live, live_buffers, live_programs, live_pendings,
            graph_records, graph_replays, graph_uploads_skipped, graph_launches, sequence_runs,
            live_graphs, live_sequences,
        }
        vyre_upload_range { offset, bytes, src }
        vyre_download_range { offset, bytes, dst }
        vyre_buffer_info: default { struct_size, flags, bytes, device_pointer, context }
        vyre_buffer_copy_desc: default {
            struct_size, flags, src, src_offset, dst, dst_offset, bytes,
        }
        vyre_buffer_wrap_desc: default { struct_size, flags, device_pointer, bytes }
        vyre_ipc_handle { bytes }
        vyre_binding_decl: default {
            struct_size, role, name, element_size, reserved0, element_count, output_offset,
            output_length,
        }
        vyre_kernel_param { kind, index }
        vyre_program_desc: default {
            struct_size, code_kind, code, code_size, entry, bindings, binding_count,
            workgroup_size, shared_memory_bytes, params, param_count, compile_options,
            compile_option_count,
        }
        vyre_dispatch_binding: default {
            struct_size, source, host_input, host_output, host_bytes, buffer, offset, length,
        }
        vyre_dispatch_desc: default {
            struct_size, flags, bindings, binding_count, param_words, param_word_count, scalars,
            scalar_count, grid, block, element_count, fixpoint_iterations, shared_memory_bytes,
        }
        vyre_timing: default { struct_size, reserved0, wall_ns, device_ns, enqueue_ns, wait_ns }
        vyre_graph_replay_desc: default {
            struct_size, flags, bindings, binding_count, param_words, param_word_count, scalars,
            scalar_count, element_count,
        }
        vyre_graph_info: default {
            struct_size, from_sequence, context, node_count, kernel_node_count,
            unchanged_input_node_count, element_count, capacity_elements, replays,
            host_input_bytes, host_output_bytes,
        }
        vyre_graph_node_info: default {
            struct_size, kind, cu_graph_node, cu_graph_exec, cu_function, grid, block,
            shared_memory_bytes, argument_count, arguments, memset_dst, memset_value,
            memset_element_size, memset_width, memset_height, memset_pitch,
        }
        vyre_kernel_node_update: default { struct_size, flags, grid, reserved0, scalars, scalar_count }
        vyre_capture_desc: default { struct_size, mode, param_bytes }
        vyre_graph_loop_desc: default {
            struct_size, max_iterations, condition_buffer, condition_offset, count_buffer,
            count_offset,
        }
        vyre_sequence_step: default {
            struct_size, kind, program, dispatch, buffer, offset, bytes, src_buffer, src_offset,
            host_src, host_dst, fill_byte, reserved0,
        }
        vyre_sequence_desc: default {
            struct_size, repeat_count, steps, step_count, repeat_first, repeat_step_count,
        }
        vyre_egraph_image_desc: default {
            struct_size, device, context, row_count, class_count, child_count, row_classes,
            row_ops, child_offsets, child_lengths, row_signatures, children, cpu_threads, reserved0,
            row_capacity, class_capacity, child_capacity,
        }
        vyre_egraph_image_info: default {
            struct_size, device, context, row_count, class_count, child_count,
            canonical_class_count, bytes, row_capacity, class_capacity, child_capacity,
            changed_class_count,
        }
        vyre_egraph_rebuild_result: default {
            struct_size, rounds, merges, union_merges, classes_before, classes_after,
            rows_visited, device_ns, wall_ns, changed_class_count, full_rounds, reserved0,
        }
        vyre_egraph_rebuild_desc: default {
            struct_size, flags, unions, union_count, canonical_out, result_out, max_rounds,
            reserved0,
        }
        vyre_egraph_append_desc: default {
            struct_size, reserved0, class_count, row_count, child_count, row_classes, row_ops,
            child_offsets, child_lengths, row_signatures, children,
        }
    }
}

macro_rules! constants {
    ($($c:ident),* $(,)?) => {
        vec![$((stringify!($c), sys::$c as u64)),*]
    };
}

fn rust_constants() -> BTreeMap<String, u64> {
    constants!(
        VYRE_CUDA_VERSION_MAJOR,
        VYRE_CUDA_VERSION_MINOR,
        VYRE_CUDA_VERSION_PATCH,
        VYRE_CUDA_VERSION,
        VYRE_WAIT_FOREVER,
        VYRE_IPC_HANDLE_BYTES,
        VYRE_GRAPH_NODE_MAX_ARGUMENTS,
        VYRE_STATUS_OK,
        VYRE_STATUS_INVALID_ARGUMENT,
        VYRE_STATUS_INVALID_HANDLE,
        VYRE_STATUS_STALE_HANDLE,
        VYRE_STATUS_UNSUPPORTED_STRUCT_SIZE,
        VYRE_STATUS_OUT_OF_RANGE,
        VYRE_STATUS_NO_DRIVER,
        VYRE_STATUS_NO_DEVICE,
        VYRE_STATUS_DRIVER_TOO_OLD,
        VYRE_STATUS_NVRTC_UNAVAILABLE,
        VYRE_STATUS_OUT_OF_MEMORY,
        VYRE_STATUS_COMPILE_FAILED,
        VYRE_STATUS_ENTRY_NOT_FOUND,
        VYRE_STATUS_LIMIT_EXCEEDED,
        VYRE_STATUS_LAUNCH_FAILED,
        VYRE_STATUS_TIMEOUT,
        VYRE_STATUS_NOT_READY,
        VYRE_STATUS_INVALID_STATE,
        VYRE_STATUS_DRIVER_ERROR,
        VYRE_STATUS_INTERNAL,
        VYRE_STATUS_SHAPE_MISMATCH,
        VYRE_STATUS_DEVICE_FAULT,
        VYRE_STATUS_FORCE32,
        VYRE_LOG_ERROR,
        VYRE_LOG_WARNING,
        VYRE_LOG_INFO,
        VYRE_LOG_TRACE,
        VYRE_LOG_LEVEL_FORCE32,
        VYRE_CODE_PTX,
        VYRE_CODE_BINARY,
        VYRE_CODE_CUDA_SOURCE,
        VYRE_CODE_KIND_FORCE32,
        VYRE_ROLE_INPUT,
        VYRE_ROLE_OUTPUT,
        VYRE_ROLE_INPUT_OUTPUT,
        VYRE_ROLE_SHARED,
        VYRE_BINDING_ROLE_FORCE32,
        VYRE_PARAM_BINDING,
        VYRE_PARAM_SCALAR32,
        VYRE_PARAM_SCALAR64,
        VYRE_PARAM_PARAM_WORDS,
        VYRE_PARAM_NULL_POINTER,
        VYRE_PARAM_KIND_FORCE32,
        VYRE_SOURCE_HOST,
        VYRE_SOURCE_RESIDENT,
        VYRE_BINDING_SOURCE_FORCE32,
        VYRE_BUFFER_INFO_FLAG_BORROWED,
        VYRE_BUFFER_INFO_FLAG_IMPORTED,
        VYRE_DISPATCH_FLAG_DEVICE_TIMING,
        VYRE_DISPATCH_FLAG_COOPERATIVE,
        VYRE_BUFFER_COPY_FLAG_STAGED,
        VYRE_GRAPH_NODE_KERNEL,
        VYRE_GRAPH_NODE_MEMCPY,
        VYRE_GRAPH_NODE_MEMSET,
        VYRE_GRAPH_NODE_OTHER,
        VYRE_GRAPH_NODE_HOST,
        VYRE_GRAPH_NODE_CHILD_GRAPH,
        VYRE_GRAPH_NODE_EMPTY,
        VYRE_GRAPH_NODE_EVENT_RECORD,
        VYRE_GRAPH_NODE_EVENT_WAIT,
        VYRE_GRAPH_NODE_CONDITIONAL,
        VYRE_GRAPH_NODE_MEM_ALLOC,
        VYRE_GRAPH_NODE_MEM_FREE,
        VYRE_GRAPH_NODE_KIND_FORCE32,
        VYRE_KERNEL_NODE_UPDATE_GRID,
        VYRE_KERNEL_NODE_UPDATE_SCALARS,
        VYRE_GRAPH_NODE_SET_RAW,
        VYRE_CAPTURE_MODE_THREAD_LOCAL,
        VYRE_CAPTURE_MODE_GLOBAL,
        VYRE_CAPTURE_MODE_RELAXED,
        VYRE_STEP_DISPATCH,
        VYRE_STEP_FILL,
        VYRE_STEP_COPY,
        VYRE_STEP_UPLOAD,
        VYRE_STEP_DOWNLOAD,
        VYRE_STEP_KIND_FORCE32,
        VYRE_EGRAPH_DEVICE_GPU,
        VYRE_EGRAPH_DEVICE_CPU,
        VYRE_EGRAPH_DEVICE_FORCE32,
        VYRE_EGRAPH_COLUMN_ROW_CLASSES,
        VYRE_EGRAPH_COLUMN_ROW_OPS,
        VYRE_EGRAPH_COLUMN_CHILD_OFFSETS,
        VYRE_EGRAPH_COLUMN_CHILD_LENGTHS,
        VYRE_EGRAPH_COLUMN_ROW_SIGNATURES,
        VYRE_EGRAPH_COLUMN_CHILDREN,
        VYRE_EGRAPH_COLUMN_CANONICAL_CLASSES,
        VYRE_EGRAPH_COLUMN_FORCE32,
        VYRE_EGRAPH_REBUILD_RESET,
        VYRE_EGRAPH_REBUILD_DEVICE_TIMING,
        VYRE_EGRAPH_REBUILD_COLLIDING_HASH,
        VYRE_EGRAPH_REBUILD_DEVICE_ROUNDS,
    )
    .into_iter()
    .map(|(n, v)| (n.to_string(), v))
    .collect()
}

/// Builds and runs a C program over the header; returns its output lines.
fn run_c(program: &str) -> Vec<String> {
    let cc = std::env::var("CC")
        .ok()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "cc".to_string());
    let dir = std::env::temp_dir().join(format!("vyre-cuda-sys-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, program).unwrap();
    // CC may carry arguments ("ccache gcc", "gcc -m64").
    let mut words = cc.split_whitespace();
    let program = words.next().expect("CC is empty");
    let built = Command::new(program)
        .args(words)
        .args(["-std=c11", "-Wall", "-Werror", "-I"])
        .arg(include_dir())
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run the C compiler {cc:?}: {e}. Fix: install cc or set CC")
        });
    assert!(
        built.status.success(),
        "{cc} failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn structs_and_constants_match_the_c_compiler() {
    let text = header_text();
    let structs = header_structs(&text);
    let constants = header_constants(&text);
    let rust = rust_layouts();
    let rust_consts = rust_constants();

    let c_names: BTreeSet<&String> = structs.keys().collect();
    let r_names: BTreeSet<&String> = rust.keys().collect();
    assert_eq!(
        c_names, r_names,
        "structs of the header vs those checked here"
    );
    let c_consts: BTreeSet<&String> = constants.iter().collect();
    let r_consts: BTreeSet<&String> = rust_consts.keys().collect();
    assert_eq!(
        c_consts, r_consts,
        "enumerators and constants of the header vs vyre-cuda-sys"
    );

    let c = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include \"vyre_cuda.h\"\n\
         static void bytes(const char* s, const char* f, const void* p, size_t n) {\n\
           printf(\"I %s %s \", s, f);\n\
           for (size_t i = 0; i < n; ++i) printf(\"%02x\", ((const unsigned char*)p)[i]);\n\
           printf(\"\\n\");\n}\n",
    );
    let mut inits = String::new();
    let mut body = String::from("int main(void) {\n");
    for (name, fields) in &structs {
        body += &format!("  printf(\"S {name} %zu %zu\\n\", sizeof({name}), _Alignof({name}));\n");
        for f in fields {
            body += &format!(
                "  printf(\"F {name} {f} %zu %zu\\n\", offsetof({name}, {f}), sizeof((({name}*)0)->{f}));\n"
            );
        }
        if let Some(m) = init_macro(&text, name) {
            inits += &format!("static const {name} init_{name} = {m};\n");
            for f in fields {
                body += &format!(
                    "  bytes(\"{name}\", \"{f}\", &init_{name}.{f}, sizeof(init_{name}.{f}));\n"
                );
            }
        }
    }
    for name in &constants {
        body += &format!("  printf(\"E {name} %llu\\n\", (unsigned long long)({name}));\n");
    }
    body += "  return 0;\n}\n";
    let lines = run_c(&format!("{c}{inits}{body}"));

    let mut checked = 0;
    for line in &lines {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts[0] {
            "S" => {
                let r = &rust[parts[1]];
                assert_eq!(
                    r.size,
                    parts[2].parse::<usize>().unwrap(),
                    "sizeof({})",
                    parts[1]
                );
                assert_eq!(
                    r.align,
                    parts[3].parse::<usize>().unwrap(),
                    "alignof({})",
                    parts[1]
                );
                let names: Vec<&str> = r.fields.iter().map(|f| f.0).collect();
                let c_fields: Vec<&str> = structs[parts[1]].iter().map(String::as_str).collect();
                assert_eq!(names, c_fields, "fields of {}", parts[1]);
            }
            "F" => {
                let r = &rust[parts[1]];
                let (_, offset, size) = *r.fields.iter().find(|f| f.0 == parts[2]).unwrap();
                assert_eq!(
                    offset,
                    parts[3].parse::<usize>().unwrap(),
                    "offsetof({}, {})",
                    parts[1],
                    parts[2]
                );
                assert_eq!(
                    size,
                    parts[4].parse::<usize>().unwrap(),
                    "sizeof({}.{})",
                    parts[1],
                    parts[2]
                );
            }
            "I" => {
                let r = &rust[parts[1]];
                let index = r.fields.iter().position(|f| f.0 == parts[2]).unwrap();
                let init = r.init.as_ref().unwrap_or_else(|| {
                    panic!(
                        "{} has an INIT macro but no Default in vyre-cuda-sys",
                        parts[1]
                    )
                });
                let hex: String = init[index].iter().map(|b| format!("{b:02x}")).collect();
                assert_eq!(
                    hex, parts[3],
                    "{}::default().{} vs its INIT macro",
                    parts[1], parts[2]
                );
            }
            "E" => {
                assert_eq!(
                    rust_consts[parts[1]],
                    parts[2].parse::<u64>().unwrap(),
                    "{}",
                    parts[1]
                );
            }
            _ => panic!("unexpected line {line:?}"),
        }
        checked += 1;
    }
    assert!(checked > 300, "only {checked} facts checked");
    // Every struct the header gives an INIT macro has a Default here, and no other.
    for (name, layout) in &rust {
        assert_eq!(
            layout.init.is_some(),
            init_macro(&text, name).is_some() || layout.fields == [("bits", 0, 8)],
            "{name}: Default vs VYRE_*_INIT"
        );
    }
}

#[test]
fn grown_structs_keep_their_older_versions_as_a_prefix() {
    // vyre_device_info: version 1 (328 bytes) ends where version 2's
    // peer_access_mask begins; version 2 is 336 bytes.
    assert_eq!(offset_of!(sys::vyre_device_info, peer_access_mask), 328);
    assert_eq!(size_of::<sys::vyre_device_info>(), 336);
    assert_eq!(sys::vyre_device_info::default().struct_size, 336);
    assert_eq!(size_of::<sys::vyre_buffer_copy_desc>(), 48);
}

#[test]
fn status_names_come_from_the_library() {
    for (status, name) in [
        (sys::VYRE_STATUS_OK, "VYRE_STATUS_OK"),
        (sys::VYRE_STATUS_DEVICE_FAULT, "VYRE_STATUS_DEVICE_FAULT"),
        (12345, "VYRE_STATUS_UNKNOWN"),
    ] {
        let got = unsafe { std::ffi::CStr::from_ptr(sys::vyre_status_name(status)) };
        assert_eq!(got.to_str().unwrap(), name);
    }
}
