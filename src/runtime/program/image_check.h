// Kernel images proven whole before the driver sees them.
//
// cuModuleLoadDataEx takes no size: the driver trusts the headers of a cubin
// or fatbin and reads wherever they point, so an image cut short (or forged)
// makes it read past the caller's buffer, which crashes or hangs inside
// libcuda. CheckBinaryImage parses the headers from code_size alone and
// proves, with overflow-checked arithmetic, that every header, section,
// program header and fatbin entry lies inside the image:
//
//   cubin   ELF64, little-endian, e_machine EM_CUDA (190). The ELF header
//           (e_ehsize), the program header table (e_phoff, e_phentsize,
//           e_phnum) and the section header table (e_shoff, e_shentsize,
//           e_shnum, extended numbering included) lie inside the image; so
//           does every section's [sh_offset, +sh_size) (SHT_NOBITS and
//           SHT_NULL excepted) and every program header's
//           [p_offset, +p_filesz). References a loader follows are checked
//           too: e_shstrndx, section names, string tables end with a NUL,
//           symbol tables (entry size, string table link, every st_name and
//           st_shndx) and relocation tables (entry size, symbol table link,
//           target section, every symbol index).
//   fatbin  the container header (magic 0xBA55ED50, headerSize, fatSize) and
//           [0, headerSize + fatSize) inside the image; each entry's header
//           (kind, header size, payload size) and payload inside the
//           container; an uncompressed ELF entry is checked as a cubin within
//           its payload (compressed entries: bounds only). Bytes after the
//           container are ignored (the driver reads one container).
//
// Anything else is VYRE_STATUS_INVALID_ARGUMENT whose message names the bytes
// needed and the bytes given ("the cubin's section headers end at byte 10896
// but code_size is 1000"), or for another format, the formats accepted.
#ifndef VYRE_RUNTIME_PROGRAM_IMAGE_CHECK_H_
#define VYRE_RUNTIME_PROGRAM_IMAGE_CHECK_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace vyre {

enum class BinaryFormat { kCubin, kFatbin };

// The ELF and fatbin constants the checks use (public for tests).
inline constexpr uint16_t kElfMachineCuda = 190;     // EM_CUDA
inline constexpr uint64_t kElf64HeaderBytes = 64;    // sizeof(Elf64_Ehdr)
inline constexpr uint64_t kElf64SectionBytes = 64;   // sizeof(Elf64_Shdr)
inline constexpr uint64_t kElf64ProgramBytes = 56;   // sizeof(Elf64_Phdr)
inline constexpr uint32_t kFatbinMagic = 0xBA55ED50;
inline constexpr uint64_t kFatbinHeaderBytes = 16;       // magic, version, headerSize, fatSize
inline constexpr uint64_t kFatbinEntryHeaderBytes = 16;  // kind, version, headerSize, size

// Checks that the `size` bytes at `image` are a whole cubin or fatbin (see
// above). `what` starts every message (e.g. "vyre_program_create"). Reads
// nothing outside [image, image + size).
absl::StatusOr<BinaryFormat> CheckBinaryImage(const char* what, const void* image, size_t size);

// PTX or CUDA source given with a size (trailing NULs already dropped):
// INVALID_ARGUMENT when a NUL comes before `size`, since the compiler would
// stop there and silently drop the rest. `kind` names the code in messages
// ("PTX", "CUDA source").
absl::Status CheckCodeText(const char* what, const char* kind, const char* text, size_t size);

// PTX (`size` bytes, trailing NULs dropped): INVALID_ARGUMENT when it begins
// with the magic number of a cubin (ELF), a fatbin or a fatbin wrapper.
// cuModuleLoadDataEx tells formats apart by their first bytes, not by the
// caller's code_kind, so such "PTX" would be parsed as a binary image, past
// the end of the text, without the checks CheckBinaryImage makes.
absl::Status CheckPtxIsNotBinary(const char* what, const char* text, size_t size);

}  // namespace vyre

#endif  // VYRE_RUNTIME_PROGRAM_IMAGE_CHECK_H_
