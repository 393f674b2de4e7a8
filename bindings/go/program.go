package vyrecuda

/*
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"strings"
	"sync/atomic"
	"unsafe"
)

// CodeKind is what a program's code is (vyre_code_kind).
type CodeKind int32

const (
	// CodePTX is PTX text.
	CodePTX CodeKind = C.VYRE_CODE_PTX
	// CodeBinary is a cubin or fatbin image.
	CodeBinary CodeKind = C.VYRE_CODE_BINARY
	// CodeCUDASource is CUDA C++ compiled at run time through NVRTC.
	CodeCUDASource CodeKind = C.VYRE_CODE_CUDA_SOURCE
)

// Role is how a kernel uses a binding (vyre_binding_role).
type Role int32

const (
	RoleInput       Role = C.VYRE_ROLE_INPUT
	RoleOutput      Role = C.VYRE_ROLE_OUTPUT
	RoleInputOutput Role = C.VYRE_ROLE_INPUT_OUTPUT
	// RoleShared is dynamic shared memory: ElementSize * ElementCount bytes
	// are added to the launch's dynamic shared memory; no pointer is passed.
	// Bind it with Shared().
	RoleShared Role = C.VYRE_ROLE_SHARED
)

// ParamKind is one kernel parameter of an explicit parameter list
// (vyre_param_kind).
type ParamKind int32

const (
	// ParamBinding is the device pointer of binding Index.
	ParamBinding ParamKind = C.VYRE_PARAM_BINDING
	// ParamScalar32 is a 4-byte scalar from Dispatch.Scalars[Index] (low 32 bits).
	ParamScalar32 ParamKind = C.VYRE_PARAM_SCALAR32
	// ParamScalar64 is an 8-byte scalar from Dispatch.Scalars[Index].
	ParamScalar64 ParamKind = C.VYRE_PARAM_SCALAR64
	// ParamWords is the device pointer of the dispatch's u32 parameter words.
	ParamWords ParamKind = C.VYRE_PARAM_PARAM_WORDS
	// ParamNullPointer is a null 8-byte pointer (Triton's unused scratch pointers).
	ParamNullPointer ParamKind = C.VYRE_PARAM_NULL_POINTER
)

// Param is one entry of an explicit kernel parameter list.
type Param struct {
	Kind  ParamKind
	Index uint32
}

// BindingDecl declares one binding of a program (vyre_binding_decl).
type BindingDecl struct {
	Role Role
	// Name is used in messages; may be empty.
	Name string
	// ElementSize is bytes per element; 0 means 4 (the C default). Every
	// bound length must be a multiple of it.
	ElementSize uint32
	// ElementCount is the elements, or 0 for "sized by what is bound".
	ElementCount uint64
	// OutputOffset and OutputLength limit the read-back of a host output to
	// [offset, offset+length) bytes; length 0 means the whole binding.
	OutputOffset uint64
	OutputLength uint64
}

// ProgramDesc describes a program (vyre_program_desc).
type ProgramDesc struct {
	Kind CodeKind // 0 means CodePTX
	// Code is PTX text, a cubin/fatbin image or CUDA C++ source; copied.
	Code []byte
	// Entry is the kernel's name (mangled for C++ kernels not extern "C").
	Entry    string
	Bindings []BindingDecl
	// WorkgroupSize is threads per block; y and z of 0 mean 1. All zero
	// means {256, 1, 1}.
	WorkgroupSize [3]uint32
	// SharedMemoryBytes is dynamic shared memory per launch, added to the
	// SHARED bindings'.
	SharedMemoryBytes uint32
	// Params is an explicit kernel parameter list; nil selects the default
	// convention (one device pointer per non-SHARED binding, then the
	// pointer to the u32 parameter words).
	Params []Param
	// CompileOptions are NVRTC options for CUDA source ("-std=c++17").
	CompileOptions []string
}

// Program is a kernel loaded on a context (vyre_program). Safe for
// concurrent use; Close destroys it (dispatches already enqueued keep the
// module until they complete).
type Program struct {
	ctx *Context
	h   atomic.Uint64
}

// NewProgram builds a program: compiles or loads its module through the
// context's module cache and resolves the entry (vyre_program_create).
// Compile errors carry the JIT or NVRTC log in Error.Log.
func (c *Context) NewProgram(d ProgramDesc) (*Program, error) {
	const op = "vyre_program_create"
	if err := c.check(op); err != nil {
		return nil, err
	}
	if err := noNUL(op, "the entry", d.Entry); err != nil {
		return nil, err
	}
	for _, b := range d.Bindings {
		if err := noNUL(op, "a binding name", b.Name); err != nil {
			return nil, err
		}
	}
	for _, o := range d.CompileOptions {
		if err := noNUL(op, "a compile option", o); err != nil {
			return nil, err
		}
	}
	a := getArena()
	defer putArena(a)
	desc := (*C.vyre_program_desc)(a.alloc(C.sizeof_vyre_program_desc))
	desc.struct_size = C.sizeof_vyre_program_desc
	kind := d.Kind
	if kind == 0 {
		kind = CodePTX
	}
	desc.code_kind = C.vyre_code_kind(kind)
	desc.code = a.bytes(d.Code)
	desc.code_size = C.size_t(len(d.Code))
	desc.entry = a.cstring(d.Entry)
	if len(d.Bindings) > 0 {
		decls := (*C.vyre_binding_decl)(a.alloc(uintptr(len(d.Bindings)) * C.sizeof_vyre_binding_decl))
		ds := unsafe.Slice(decls, len(d.Bindings))
		for i, b := range d.Bindings {
			ds[i].struct_size = C.sizeof_vyre_binding_decl
			ds[i].role = C.vyre_binding_role(b.Role)
			if b.Name != "" {
				ds[i].name = a.cstring(b.Name)
			}
			size := b.ElementSize
			if size == 0 {
				size = 4
			}
			ds[i].element_size = C.uint32_t(size)
			ds[i].element_count = C.uint64_t(b.ElementCount)
			ds[i].output_offset = C.uint64_t(b.OutputOffset)
			ds[i].output_length = C.uint64_t(b.OutputLength)
		}
		desc.bindings = decls
		desc.binding_count = C.size_t(len(d.Bindings))
	}
	wg := d.WorkgroupSize
	if wg == [3]uint32{} {
		wg = [3]uint32{256, 1, 1}
	}
	for k := 0; k < 3; k++ {
		desc.workgroup_size[k] = C.uint32_t(wg[k])
	}
	desc.shared_memory_bytes = C.uint32_t(d.SharedMemoryBytes)
	if len(d.Params) > 0 {
		ps := (*C.vyre_kernel_param)(a.alloc(uintptr(len(d.Params)) * C.sizeof_vyre_kernel_param))
		pss := unsafe.Slice(ps, len(d.Params))
		for i, p := range d.Params {
			pss[i].kind = C.vyre_param_kind(p.Kind)
			pss[i].index = C.uint32_t(p.Index)
		}
		desc.params = ps
		desc.param_count = C.size_t(len(d.Params))
	}
	if len(d.CompileOptions) > 0 {
		opts := (**C.char)(a.alloc(uintptr(len(d.CompileOptions)) * unsafe.Sizeof(uintptr(0))))
		os := unsafe.Slice(opts, len(d.CompileOptions))
		for i, o := range d.CompileOptions {
			os[i] = a.cstring(o)
		}
		desc.compile_options = opts
		desc.compile_option_count = C.size_t(len(d.CompileOptions))
	}
	var out C.vyre_program
	err := call(op, func() C.vyre_status { return C.vyre_program_create(c.handle(), desc, &out) })
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	p := &Program{ctx: c}
	p.h.Store(uint64(out.bits))
	runtime.SetFinalizer(p, func(p *Program) { _ = p.Close() })
	return p, nil
}

// noNUL refuses a string C would cut at a NUL byte.
func noNUL(op, what, s string) error {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return goError(StatusInvalidArgument, op,
			"%s holds a NUL byte at offset %d. Fix: pass it without NUL bytes (C strings end at the first).", what, i)
	}
	return nil
}

// Handle is the library handle's bits (0 once closed).
func (p *Program) Handle() uint64 { return p.h.Load() }

// Context is the program's owner.
func (p *Program) Context() *Context { return p.ctx }

func (p *Program) check(op string) error {
	if p == nil || p.h.Load() == 0 {
		return closedError(op, "Program")
	}
	return nil
}

// Close destroys the program (vyre_program_destroy). Closing twice, or
// after the Context's Close, does nothing.
func (p *Program) Close() error {
	if p == nil {
		return nil
	}
	bits := p.h.Swap(0)
	if bits == 0 {
		return nil
	}
	runtime.SetFinalizer(p, nil)
	err := call("vyre_program_destroy", func() C.vyre_status {
		return C.vyre_program_destroy(C.vyre_program{bits: C.uint64_t(bits)})
	})
	if isStale(err) {
		return nil
	}
	return err
}
