// Kernel entries of module images: names after ".entry" in PTX text, FUNC
// symbols marked as CUDA entries in a cubin, and both inside a fatbin.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "module_image.h"

namespace fake_driver {
namespace {

// Collects the names after every ".entry"; a name ends at '(' or whitespace.
std::vector<std::string> PtxEntryNames(const char* text, size_t length) {
  std::vector<std::string> names;
  static constexpr char kKeyword[] = ".entry";
  const std::string_view ptx(text, length);
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  for (size_t at = ptx.find(kKeyword); at != std::string_view::npos;
       at = ptx.find(kKeyword, at)) {
    size_t p = at + sizeof(kKeyword) - 1;
    at = p;
    if (p >= ptx.size() || !is_space(ptx[p])) continue;  // e.g. ".entryfoo"
    while (p < ptx.size() && is_space(ptx[p])) ++p;
    size_t begin = p;
    while (p < ptx.size() && ptx[p] != '(' && !is_space(ptx[p])) ++p;
    if (p > begin) names.emplace_back(ptx.substr(begin, p - begin));
  }
  return names;
}

template <typename T>
T ReadAt(const unsigned char* base, uint64_t offset) {
  T value;
  std::memcpy(&value, base + offset, sizeof(T));
  return value;
}

// Compares byte by byte, stopping at the first difference, so a short
// NUL-terminated PTX string is never read past its end.
bool StartsWith(const unsigned char* image, const unsigned char* magic, size_t length) {
  for (size_t i = 0; i < length; ++i) {
    if (image[i] != magic[i]) return false;
  }
  return true;
}

}  // namespace

bool IsElf(const unsigned char* image) {
  static constexpr unsigned char kElfMagic[] = {0x7F, 'E', 'L', 'F'};
  return StartsWith(image, kElfMagic, sizeof(kElfMagic));
}

bool IsFatbin(const unsigned char* image) {
  static constexpr unsigned char kFatbinMagic[] = {0x50, 0xED, 0x55, 0xBA};  // 0xBA55ED50
  return StartsWith(image, kFatbinMagic, sizeof(kFatbinMagic));
}

namespace {

// True when [offset, offset + length) lies inside `size` bytes (no overflow).
bool Inside(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

// cuModuleLoadDataEx takes no size, so the fake, like the real driver, only
// knows what an image's headers declare (the library proves the image whole
// before it calls). The parsers below never read outside that: a cubin's
// reads are bounded by `size` (a fatbin entry's payload size, or for a
// cubin on its own the extent its headers declare), and forged offsets give
// no entries instead of a wild read.

// The bytes a 64-bit little-endian ELF declares through its headers: the
// ELF header, both header tables and every section with contents. 0 when
// the image is no such ELF or a declared end overflows.
uint64_t ElfDeclaredSize(const unsigned char* elf) {
  if (!IsElf(elf) || elf[4] != 2 /* ELFCLASS64 */ || elf[5] != 1 /* little endian */) return 0;
  const uint64_t program_offset = ReadAt<uint64_t>(elf, 0x20);
  const uint64_t section_offset = ReadAt<uint64_t>(elf, 0x28);
  const uint64_t program_bytes =
      uint64_t{ReadAt<uint16_t>(elf, 0x36)} * ReadAt<uint16_t>(elf, 0x38);
  const uint16_t section_size = ReadAt<uint16_t>(elf, 0x3A);
  const uint16_t section_count = ReadAt<uint16_t>(elf, 0x3C);
  if (section_count > 0 && section_size < 0x40) return 0;
  uint64_t extent = 0x40;
  auto cover = [&](uint64_t offset, uint64_t length) {
    if (offset > UINT64_MAX - length) return false;
    extent = std::max(extent, offset + length);
    return true;
  };
  if (!cover(program_offset, program_bytes) ||
      !cover(section_offset, uint64_t{section_count} * section_size)) {
    return 0;
  }
  for (uint32_t i = 0; i < section_count; ++i) {
    const uint64_t header = section_offset + uint64_t{i} * section_size;
    const uint32_t type = ReadAt<uint32_t>(elf, header + 0x04);
    if (type == 0 /* SHT_NULL */ || type == 8 /* SHT_NOBITS */) continue;
    if (!cover(ReadAt<uint64_t>(elf, header + 0x18), ReadAt<uint64_t>(elf, header + 0x20))) {
      return 0;
    }
  }
  return extent;
}

// Kernel entries of a cubin of `size` bytes: FUNC symbols marked
// STO_CUDA_ENTRY (0x10).
std::vector<std::string> CubinEntryNames(const unsigned char* elf, uint64_t size) {
  std::vector<std::string> names;
  if (size < 0x40 || !IsElf(elf) || elf[4] != 2 /* ELFCLASS64 */ ||
      elf[5] != 1 /* little endian */) {
    return names;
  }
  const uint64_t section_offset = ReadAt<uint64_t>(elf, 0x28);
  const uint16_t section_size = ReadAt<uint16_t>(elf, 0x3A);
  const uint16_t section_count = ReadAt<uint16_t>(elf, 0x3C);
  if (section_size < 0x40 ||
      !Inside(section_offset, uint64_t{section_count} * section_size, size)) {
    return names;
  }
  auto section = [&](uint32_t i) { return section_offset + uint64_t{i} * section_size; };
  for (uint32_t i = 0; i < section_count; ++i) {
    if (ReadAt<uint32_t>(elf, section(i) + 0x04) != 2 /* SHT_SYMTAB */) continue;
    const uint64_t symbols = ReadAt<uint64_t>(elf, section(i) + 0x18);
    const uint64_t symbols_size = ReadAt<uint64_t>(elf, section(i) + 0x20);
    const uint32_t strings_index = ReadAt<uint32_t>(elf, section(i) + 0x28);
    const uint64_t entry_size = ReadAt<uint64_t>(elf, section(i) + 0x38);
    if (entry_size < 24 || strings_index >= section_count ||
        !Inside(symbols, symbols_size, size)) {
      continue;
    }
    const uint64_t strings = ReadAt<uint64_t>(elf, section(strings_index) + 0x18);
    const uint64_t strings_size = ReadAt<uint64_t>(elf, section(strings_index) + 0x20);
    if (!Inside(strings, strings_size, size)) continue;
    for (uint64_t k = 0; k < symbols_size / entry_size; ++k) {
      const uint64_t at = symbols + k * entry_size;
      const uint32_t name = ReadAt<uint32_t>(elf, at);
      const uint8_t info = elf[at + 4];
      const uint8_t other = elf[at + 5];
      if ((info & 0xF) != 2 /* STT_FUNC */ || (other & 0x10) == 0 || name >= strings_size) {
        continue;
      }
      const char* text = reinterpret_cast<const char*>(elf + strings + name);
      names.emplace_back(text, strnlen(text, strings_size - name));
    }
  }
  return names;
}

// A fatbin holds cubins and PTX; collect the entries of every uncompressed
// one. Every entry must lie inside the container's declared size.
std::vector<std::string> FatbinEntryNames(const unsigned char* fatbin) {
  std::vector<std::string> names;
  const uint16_t header_size = ReadAt<uint16_t>(fatbin, 6);
  const uint64_t fat_size = ReadAt<uint64_t>(fatbin, 8);
  if (header_size < 16 || fat_size > UINT64_MAX - header_size) return names;
  const uint64_t end = header_size + fat_size;
  for (uint64_t at = header_size; Inside(at, 16, end);) {
    const uint16_t kind = ReadAt<uint16_t>(fatbin, at);
    const uint32_t entry_header = ReadAt<uint32_t>(fatbin, at + 4);
    const uint64_t payload_size = ReadAt<uint64_t>(fatbin, at + 8);
    if (entry_header < 16 || !Inside(at, entry_header, end) ||
        !Inside(at + entry_header, payload_size, end)) {
      break;
    }
    const unsigned char* payload = fatbin + at + entry_header;
    std::vector<std::string> found;
    if (kind == 2 && payload_size >= 0x40 && IsElf(payload)) {
      found = CubinEntryNames(payload, payload_size);
    }
    if (kind == 1) {
      found = PtxEntryNames(reinterpret_cast<const char*>(payload),
                            static_cast<size_t>(payload_size));
    }
    names.insert(names.end(), found.begin(), found.end());
    at += entry_header + payload_size;
  }
  return names;
}

}  // namespace

// PTX starts, after blank space and comments, with its .version directive;
// the real JIT refuses anything else at its first token.
std::string PtxStartError(const char* text) {
  size_t line = 1;
  const char* p = text;
  for (;;) {
    if (*p == '\n') ++line;
    if (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') {
      ++p;
    } else if (p[0] == '/' && p[1] == '/') {
      while (*p != '\0' && *p != '\n') ++p;
    } else if (p[0] == '/' && p[1] == '*') {
      const char* end = std::strstr(p + 2, "*/");
      if (end == nullptr) end = p + std::strlen(p) - 2;
      for (const char* q = p; q < end; ++q) line += *q == '\n';
      p = end + 2;
    } else {
      break;
    }
  }
  auto is_token = [](char c) {
    return c > ' ' && c < 0x7F && std::strchr("(){};,\"'", c) == nullptr;
  };
  std::string token;
  for (const char* q = p; is_token(*q) && token.size() < 40; ++q) token += *q;
  if (token == ".version") return {};
  std::string where = "fake ptxas: application ptx input, line " + std::to_string(line) +
                      "; fatal   : ";
  std::string why;
  if (*p == '\0') {
    why = "Missing .version directive at start of file";
  } else if (token.empty()) {
    char byte[8];
    std::snprintf(byte, sizeof byte, (*p > ' ' && *p < 0x7F) ? "%c" : "\\x%02X",
                  static_cast<unsigned char>(*p));
    why = std::string("Parsing error near '") + byte + "': syntax error";
  } else if (token[0] == '.') {
    why = "Missing .version directive at start of file, found '" + token + "'";
  } else {
    why = "Parsing error near '" + token + "': syntax error";
  }
  return where + why + "\nfake ptxas: fatal   : Ptx assembly aborted due to errors";
}

// The kernel entries of a module image: PTX text, a cubin or a fatbin.
std::vector<std::string> ModuleEntryNames(const void* image) {
  const auto* bytes = static_cast<const unsigned char*>(image);
  if (IsElf(bytes)) return CubinEntryNames(bytes, ElfDeclaredSize(bytes));
  if (IsFatbin(bytes)) return FatbinEntryNames(bytes);
  const char* text = static_cast<const char*>(image);
  return PtxEntryNames(text, std::strlen(text));
}

}  // namespace fake_driver
