//! Programs: PTX, cubin/fatbin or CUDA C++ source, an entry, bindings and an
//! optional explicit kernel parameter list.

use std::ffi::CString;
use std::sync::Arc;

use vyre_cuda_sys as sys;

use crate::context::ContextInner;
use crate::error::{check, Error, Result, Status};
use crate::{Context, Pod};

/// The code of a program.
#[derive(Clone, Copy, Debug)]
pub enum Code<'a> {
    /// PTX text.
    Ptx(&'a str),
    /// A cubin or fatbin image (its exact size).
    Binary(&'a [u8]),
    /// CUDA C++ source, compiled at run time through NVRTC.
    CudaSource(&'a str),
}

/// How a kernel uses a binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Input,
    Output,
    InputOutput,
    /// Dynamic shared memory: element_size * element_count bytes are added
    /// to the launch's dynamic shared memory; no pointer is passed.
    Shared,
}

impl Role {
    fn raw(self) -> sys::vyre_binding_role {
        match self {
            Role::Input => sys::VYRE_ROLE_INPUT,
            Role::Output => sys::VYRE_ROLE_OUTPUT,
            Role::InputOutput => sys::VYRE_ROLE_INPUT_OUTPUT,
            Role::Shared => sys::VYRE_ROLE_SHARED,
        }
    }
}

/// One declared binding of a program (`vyre_binding_decl`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    pub role: Role,
    /// For messages.
    pub name: Option<String>,
    /// Bytes per element (> 0); every bound length must be a multiple.
    pub element_size: u32,
    /// Elements, or 0 for "sized by what the dispatch binds".
    pub element_count: u64,
    /// Host output read-back range in bytes (length 0: the whole binding).
    pub output_offset: u64,
    pub output_length: u64,
}

impl Binding {
    /// A binding of `role` with `element_size`-byte elements.
    pub fn new(role: Role, element_size: u32) -> Binding {
        Binding {
            role,
            name: None,
            element_size,
            element_count: 0,
            output_offset: 0,
            output_length: 0,
        }
    }
    /// A binding of elements of type T.
    pub fn of<T: Pod>(role: Role) -> Binding {
        Binding::new(role, std::mem::size_of::<T>() as u32)
    }
    pub fn input<T: Pod>() -> Binding {
        Binding::of::<T>(Role::Input)
    }
    pub fn output<T: Pod>() -> Binding {
        Binding::of::<T>(Role::Output)
    }
    pub fn input_output<T: Pod>() -> Binding {
        Binding::of::<T>(Role::InputOutput)
    }
    /// `count` elements of T of dynamic shared memory.
    pub fn shared<T: Pod>(count: u64) -> Binding {
        Binding {
            element_count: count,
            ..Binding::of::<T>(Role::Shared)
        }
    }
    pub fn name(mut self, name: &str) -> Binding {
        self.name = Some(name.to_string());
        self
    }
    pub fn element_count(mut self, count: u64) -> Binding {
        self.element_count = count;
        self
    }
    /// Copy back only bytes [offset, offset + length) of a host output.
    pub fn output_range(mut self, offset: u64, length: u64) -> Binding {
        self.output_offset = offset;
        self.output_length = length;
        self
    }
}

/// One kernel parameter of an explicit parameter list (`vyre_kernel_param`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Param {
    /// The device pointer of binding `index` (8 bytes).
    Binding(u32),
    /// A 4-byte scalar from the dispatch's `scalars[index]` (low 32 bits).
    Scalar32(u32),
    /// An 8-byte scalar from the dispatch's `scalars[index]`.
    Scalar64(u32),
    /// The device pointer of the dispatch's u32 parameter words.
    ParamWords,
    /// A null 8-byte pointer (e.g. Triton's unused scratch pointers).
    NullPointer,
}

impl Param {
    fn raw(self) -> sys::vyre_kernel_param {
        let (kind, index) = match self {
            Param::Binding(i) => (sys::VYRE_PARAM_BINDING, i),
            Param::Scalar32(i) => (sys::VYRE_PARAM_SCALAR32, i),
            Param::Scalar64(i) => (sys::VYRE_PARAM_SCALAR64, i),
            Param::ParamWords => (sys::VYRE_PARAM_PARAM_WORDS, 0),
            Param::NullPointer => (sys::VYRE_PARAM_NULL_POINTER, 0),
        };
        sys::vyre_kernel_param { kind, index }
    }
}

/// Builds a [`Program`]; see [`Program::builder`].
#[derive(Clone, Debug)]
pub struct ProgramBuilder<'a> {
    code: Code<'a>,
    entry: &'a str,
    bindings: Vec<Binding>,
    workgroup_size: [u32; 3],
    shared_memory_bytes: u32,
    params: Option<Vec<Param>>,
    compile_options: Vec<String>,
}

impl<'a> ProgramBuilder<'a> {
    /// The declared bindings, in the kernel's order.
    pub fn bindings(mut self, bindings: impl IntoIterator<Item = Binding>) -> Self {
        self.bindings = bindings.into_iter().collect();
        self
    }
    pub fn binding(mut self, binding: Binding) -> Self {
        self.bindings.push(binding);
        self
    }
    /// Threads per block (x); default 256.
    pub fn workgroup_size(mut self, x: u32) -> Self {
        self.workgroup_size = [x, 1, 1];
        self
    }
    /// Threads per block in three dimensions (y and z of 0 mean 1).
    pub fn workgroup_size_3d(mut self, size: [u32; 3]) -> Self {
        self.workgroup_size = size;
        self
    }
    /// Dynamic shared memory bytes per launch, added to SHARED bindings.
    pub fn shared_memory_bytes(mut self, bytes: u32) -> Self {
        self.shared_memory_bytes = bytes;
        self
    }
    /// An explicit kernel parameter list instead of the default convention
    /// (one pointer per non-SHARED binding, then the parameter words).
    pub fn params(mut self, params: impl IntoIterator<Item = Param>) -> Self {
        self.params = Some(params.into_iter().collect());
        self
    }
    /// An NVRTC option for CUDA source (e.g. "-std=c++17").
    pub fn compile_option(mut self, option: &str) -> Self {
        self.compile_options.push(option.to_string());
        self
    }

    /// Compiles or loads the module (through the context's module cache) and
    /// resolves the entry.
    pub fn build(&self, ctx: &Context) -> Result<Program> {
        const CALL: &str = "Program::build";
        let no_nul = |what: &str, text: &str| {
            CString::new(text).map_err(|_| {
                Error::usage(
                    Status::InvalidArgument,
                    CALL,
                    format!("the {what} {text:?} holds a NUL byte. Fix: remove it."),
                )
            })
        };
        let entry = no_nul("entry name", self.entry)?;
        let names: Vec<Option<CString>> = self
            .bindings
            .iter()
            .map(|b| {
                b.name
                    .as_deref()
                    .map(|n| no_nul("binding name", n))
                    .transpose()
            })
            .collect::<Result<_>>()?;
        let options: Vec<CString> = self
            .compile_options
            .iter()
            .map(|o| no_nul("compile option", o))
            .collect::<Result<_>>()?;
        let option_ptrs: Vec<*const std::ffi::c_char> =
            options.iter().map(|o| o.as_ptr()).collect();
        let decls: Vec<sys::vyre_binding_decl> = self
            .bindings
            .iter()
            .zip(&names)
            .map(|(b, name)| sys::vyre_binding_decl {
                role: b.role.raw(),
                name: name.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
                element_size: b.element_size,
                element_count: b.element_count,
                output_offset: b.output_offset,
                output_length: b.output_length,
                ..Default::default()
            })
            .collect();
        let params: Option<Vec<sys::vyre_kernel_param>> = self
            .params
            .as_ref()
            .map(|p| p.iter().map(|p| p.raw()).collect());
        let (code_kind, code, code_size) = match self.code {
            Code::Ptx(text) => (sys::VYRE_CODE_PTX, text.as_ptr(), text.len()),
            Code::Binary(image) => (sys::VYRE_CODE_BINARY, image.as_ptr(), image.len()),
            Code::CudaSource(text) => (sys::VYRE_CODE_CUDA_SOURCE, text.as_ptr(), text.len()),
        };
        if code_size == 0 {
            // Size 0 would mean "NUL-terminated" to the library.
            return Err(Error::usage(
                Status::InvalidArgument,
                CALL,
                "the program's code is empty. Fix: pass the PTX, cubin/fatbin image or CUDA \
                 source text."
                    .into(),
            ));
        }
        let desc = sys::vyre_program_desc {
            code_kind,
            code: code.cast(),
            code_size,
            entry: entry.as_ptr(),
            bindings: if decls.is_empty() {
                std::ptr::null()
            } else {
                decls.as_ptr()
            },
            binding_count: decls.len(),
            workgroup_size: self.workgroup_size,
            shared_memory_bytes: self.shared_memory_bytes,
            params: params.as_ref().map_or(std::ptr::null(), |p| p.as_ptr()),
            param_count: params.as_ref().map_or(0, Vec::len),
            compile_options: if option_ptrs.is_empty() {
                std::ptr::null()
            } else {
                option_ptrs.as_ptr()
            },
            compile_option_count: option_ptrs.len(),
            ..Default::default()
        };
        let mut handle = sys::vyre_program::default();
        // SAFETY: every pointer in `desc` is valid for the call (the library
        // copies what it keeps).
        check(
            unsafe { sys::vyre_program_create(ctx.raw(), &desc, &mut handle) },
            "vyre_program_create",
        )?;
        Ok(Program {
            handle,
            ctx: Arc::clone(&ctx.inner),
            binding_count: self.bindings.len(),
        })
    }
}

/// A kernel loaded into a context, with its bindings and parameter list.
pub struct Program {
    pub(crate) handle: sys::vyre_program,
    pub(crate) ctx: Arc<ContextInner>,
    binding_count: usize,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Program({:#x})", self.handle.bits)
    }
}

impl Program {
    /// Starts a program of `code` whose kernel is `entry` (the mangled name
    /// for C++ kernels that are not `extern "C"`); workgroup size 256.
    pub fn builder<'a>(code: Code<'a>, entry: &'a str) -> ProgramBuilder<'a> {
        ProgramBuilder {
            code,
            entry,
            bindings: Vec::new(),
            workgroup_size: [256, 1, 1],
            shared_memory_bytes: 0,
            params: None,
            compile_options: Vec::new(),
        }
    }

    /// The raw handle, for `vyre-cuda-sys` calls. Valid while `self` lives.
    pub fn raw(&self) -> sys::vyre_program {
        self.handle
    }

    pub fn context(&self) -> Context {
        Context::from_inner(&self.ctx)
    }

    /// The number of declared bindings.
    pub fn binding_count(&self) -> usize {
        self.binding_count
    }

    /// Destroys the program now and returns the library's answer.
    pub fn destroy(mut self) -> Result<()> {
        let handle = std::mem::take(&mut self.handle);
        // SAFETY: the handle is ours and destroyed once.
        check(
            unsafe { sys::vyre_program_destroy(handle) },
            "vyre_program_destroy",
        )
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        if self.handle.bits != 0 {
            // SAFETY: the handle is ours; errors are ignored in drop.
            let _ = unsafe { sys::vyre_program_destroy(self.handle) };
        }
    }
}
