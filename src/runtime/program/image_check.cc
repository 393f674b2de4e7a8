#include "runtime/program/image_check.h"

#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "base/checked_math.h"
#include "base/status.h"

namespace vyre {
namespace {

constexpr unsigned char kElfMagicBytes[4] = {0x7F, 'E', 'L', 'F'};
constexpr unsigned char kFatbinMagicBytes[4] = {0x50, 0xED, 0x55, 0xBA};  // 0xBA55ED50 LE
// __fatBinC_Wrapper_t (fatbinary_section.h): a struct holding a pointer to
// a fatbin, not an image.
constexpr unsigned char kFatbinWrapperMagicBytes[4] = {0xB1, 0x43, 0x62, 0x46};  // 0x466243B1

// ELF section types and special indices.
constexpr uint32_t kShtNull = 0, kShtSymtab = 2, kShtStrtab = 3, kShtRela = 4, kShtNobits = 8,
                   kShtRel = 9, kShtDynsym = 11;
constexpr uint64_t kShnLoreserve = 0xFF00, kShnXindex = 0xFFFF;
constexpr uint64_t kSymBytes = 24, kRelBytes = 16, kRelaBytes = 24;

// Fatbin entry kinds and flags.
constexpr uint16_t kFatbinKindElf = 2;
constexpr uint64_t kFatbinFlagsOffset = 40;
constexpr uint64_t kFatbinCompressedFlags = 0x2000 /* LZ4 */ | 0x8000 /* zstd */;

constexpr char kFixWhole[] =
    "pass the whole image, with its exact size in bytes as code_size (a file read short or a "
    "wrong size gives this)";
constexpr char kFixDamaged[] =
    "the image is damaged or forged; rebuild it (nvcc -cubin or -fatbin) and pass it whole";

// The bytes [0, size) of an image, read little-endian; a read outside them
// gives 0 (callers check ranges first, so that never decides anything).
class Bytes {
 public:
  Bytes(const unsigned char* data, uint64_t size) : data_(data), size_(size) {}
  uint64_t size() const { return size_; }
  bool Has(uint64_t offset, uint64_t length) const { return RangeInside(offset, length, size_); }
  uint64_t Le(uint64_t offset, int bytes) const {
    if (!Has(offset, bytes)) return 0;
    uint64_t value = 0;
    for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | data_[offset + i];
    return value;
  }
  uint8_t U8(uint64_t offset) const { return static_cast<uint8_t>(Le(offset, 1)); }
  uint16_t U16(uint64_t offset) const { return static_cast<uint16_t>(Le(offset, 2)); }
  uint32_t U32(uint64_t offset) const { return static_cast<uint32_t>(Le(offset, 4)); }
  uint64_t U64(uint64_t offset) const { return Le(offset, 8); }
  bool StartsWith(const unsigned char (&magic)[4]) const {
    return size_ >= 4 && std::memcmp(data_, magic, 4) == 0;
  }
  // True when the (fewer than 4) bytes are the start of `magic`.
  bool PrefixOf(const unsigned char (&magic)[4]) const {
    return size_ < 4 && std::memcmp(data_, magic, size_) == 0;
  }
  // [offset, offset + length), which the caller proved inside.
  Bytes Sub(uint64_t offset, uint64_t length) const { return Bytes(data_ + offset, length); }

 private:
  const unsigned char* data_;
  uint64_t size_;
};

// Who is checked, for messages: "<what>: <subject>'s <part> ends at byte N but <given>."
struct Where {
  const char* what;   // "vyre_program_create"
  std::string image;  // "the cubin", "the cubin in fatbin entry 0"
  std::string given;  // "code_size is 1000", "the entry's payload (at byte 80) is 1000 bytes"
  const char* fix;    // what to do when a range is short
};

absl::Status Invalid(const Where& w, absl::string_view why, absl::string_view fix) {
  return MakeError(VYRE_STATUS_INVALID_ARGUMENT,
                   absl::StrCat(w.what, ": ", why, ". Fix: ", fix, "."));
}

absl::Status Damaged(const Where& w, absl::string_view why) {
  return Invalid(w, absl::StrCat(w.image, " ", why), kFixDamaged);
}

// OK when [offset, offset + length) lies inside the `limit` bytes `w.given`
// describes; otherwise the error naming the bytes needed and given. `part`
// is a singular noun phrase ("the cubin's section header table"), `how` says
// where the numbers come from ("e_shoff 9168 + 27 x 64 bytes").
absl::Status NeedRange(const Where& w, absl::string_view part, absl::string_view how,
                       uint64_t offset, uint64_t length, uint64_t limit) {
  std::optional<uint64_t> end = CheckedAdd(offset, length);
  if (end && *end <= limit) return absl::OkStatus();
  std::string source = how.empty() ? std::string() : absl::StrCat(" (", how, ")");
  if (!end) {
    return Invalid(w,
                   absl::StrFormat("%s would end past byte 2^64%s, an offset that overflows "
                                   "64 bits, but %s",
                                   part, source, w.given),
                   kFixDamaged);
  }
  return Invalid(w, absl::StrFormat("%s ends at byte %u%s but %s", part, *end, source, w.given),
                 w.fix);
}

// The end of [offset, offset + count x entry) or nullopt on overflow.
std::optional<uint64_t> TableEnd(uint64_t offset, uint64_t count, uint64_t entry) {
  std::optional<uint64_t> bytes = CheckedMul(count, entry);
  if (!bytes) return std::nullopt;
  return CheckedAdd(offset, *bytes);
}

// ---------------------------------------------------------------------------
// ELF64 cubins
// ---------------------------------------------------------------------------

class ElfCheck {
 public:
  ElfCheck(const Where& where, Bytes bytes) : w_(where), b_(bytes) {}

  absl::Status Run() {
    VYRE_RETURN_IF_ERROR(Ident());
    VYRE_RETURN_IF_ERROR(Header());
    VYRE_RETURN_IF_ERROR(Tables());
    VYRE_RETURN_IF_ERROR(SectionNameTable());
    VYRE_RETURN_IF_ERROR(Sections());
    VYRE_RETURN_IF_ERROR(Segments());
    VYRE_RETURN_IF_ERROR(StringTables());
    VYRE_RETURN_IF_ERROR(SymbolTables());
    return RelocationTables();
  }

 private:
  std::string Part(absl::string_view part) const { return absl::StrCat(w_.image, "'s ", part); }

  absl::Status Ident() {
    const uint64_t n = b_.size();
    if (n > 4 && b_.U8(4) != 2 /* ELFCLASS64 */) {
      if (b_.U8(4) == 1) {
        return Invalid(w_,
                       absl::StrCat(w_.image,
                                    " is a 32-bit ELF (ELFCLASS32), but CUDA loads only 64-bit "
                                    "cubins"),
                       "build the cubin for a 64-bit host (nvcc -m64, the default)");
      }
      return Damaged(w_, absl::StrFormat("has ELF class %u where a cubin has ELFCLASS64 (2)",
                                         b_.U8(4)));
    }
    if (n > 5 && b_.U8(5) != 1 /* ELFDATA2LSB */) {
      return Damaged(w_, absl::StrFormat("has ELF data encoding %u where a cubin is "
                                         "little-endian (ELFDATA2LSB, 1)",
                                         b_.U8(5)));
    }
    return NeedRange(w_, Part("ELF header"), "", 0, kElf64HeaderBytes, n);
  }

  absl::Status Header() {
    const uint16_t machine = b_.U16(18);
    if (machine != kElfMachineCuda) {
      return Invalid(w_,
                     absl::StrFormat("%s is an ELF file for machine %u, not a CUDA cubin "
                                     "(e_machine EM_CUDA, %u)",
                                     w_.image, machine, kElfMachineCuda),
                     "pass a cubin built by nvcc -cubin or ptxas (a host object or shared "
                     "library is not a kernel image)");
    }
    const uint16_t ehsize = b_.U16(52);
    if (ehsize < kElf64HeaderBytes) {
      return Damaged(w_, absl::StrFormat("declares an ELF header of %u bytes (e_ehsize) but an "
                                         "ELF64 header takes %u",
                                         ehsize, kElf64HeaderBytes));
    }
    VYRE_RETURN_IF_ERROR(NeedRange(w_, Part("ELF header"), "e_ehsize", 0, ehsize, b_.size()));
    phoff_ = b_.U64(32);
    shoff_ = b_.U64(40);
    phentsize_ = b_.U16(54);
    phnum_ = b_.U16(56);
    shentsize_ = b_.U16(58);
    shnum_ = b_.U16(60);
    shstrndx_ = b_.U16(62);
    if (phnum_ > 0 && phentsize_ < kElf64ProgramBytes) {
      return Damaged(w_, absl::StrFormat("declares program headers of %u bytes (e_phentsize) "
                                         "but an ELF64 program header takes %u",
                                         phentsize_, kElf64ProgramBytes));
    }
    if ((shnum_ > 0 || shoff_ != 0) && shentsize_ < kElf64SectionBytes) {
      return Damaged(w_, absl::StrFormat("declares section headers of %u bytes (e_shentsize) "
                                         "but an ELF64 section header takes %u",
                                         shentsize_, kElf64SectionBytes));
    }
    if (shnum_ == 0 && shoff_ != 0) {
      // Extended numbering: section 0 holds the count (sh_size) and, when
      // e_shstrndx is SHN_XINDEX, the name table's index (sh_link).
      VYRE_RETURN_IF_ERROR(NeedRange(
          w_, Part("section header 0 (it holds the section count, e_shnum being 0)"),
          absl::StrFormat("e_shoff %u", shoff_), shoff_, kElf64SectionBytes, b_.size()));
      shnum_ = b_.U64(shoff_ + 32);
      if (shstrndx_ == kShnXindex) shstrndx_ = b_.U32(shoff_ + 40);
    }
    return absl::OkStatus();
  }

  // The program and section header tables; when both are cut short, the one
  // reaching further is named (it says more of the image's real size).
  absl::Status Tables() {
    struct Table {
      const char* name;
      uint64_t offset, count, entry;
      const char* offset_field;
    };
    const Table tables[] = {
        {"program header table", phoff_, phnum_, phentsize_, "e_phoff"},
        {"section header table", shoff_, shnum_, shentsize_, "e_shoff"},
    };
    const Table* worst = nullptr;
    uint64_t worst_end = 0;
    for (const Table& t : tables) {
      if (t.count == 0) continue;
      std::optional<uint64_t> end = TableEnd(t.offset, t.count, t.entry);
      if (end && *end <= b_.size()) continue;
      uint64_t reach = end ? *end : UINT64_MAX;
      if (worst == nullptr || reach > worst_end) {
        worst = &t;
        worst_end = reach;
      }
    }
    if (worst == nullptr) return absl::OkStatus();
    std::string how = absl::StrFormat("%s %u + %u x %u bytes", worst->offset_field, worst->offset,
                                      worst->count, worst->entry);
    std::optional<uint64_t> bytes = CheckedMul(worst->count, worst->entry);
    if (!bytes) {
      return Invalid(w_,
                     absl::StrFormat("%s (%s) would end past byte 2^64, which overflows 64 "
                                     "bits, but %s",
                                     Part(worst->name), how, w_.given),
                     kFixDamaged);
    }
    return NeedRange(w_, Part(worst->name), how, worst->offset, *bytes, b_.size());
  }

  uint64_t Header(uint64_t section) const { return shoff_ + section * shentsize_; }
  uint32_t Type(uint64_t section) const { return b_.U32(Header(section) + 4); }
  uint64_t Offset(uint64_t section) const { return b_.U64(Header(section) + 24); }
  uint64_t Size(uint64_t section) const { return b_.U64(Header(section) + 32); }
  uint32_t Link(uint64_t section) const { return b_.U32(Header(section) + 40); }
  uint32_t Info(uint64_t section) const { return b_.U32(Header(section) + 44); }
  uint64_t EntrySize(uint64_t section) const { return b_.U64(Header(section) + 56); }
  bool HasContent(uint64_t section) const {
    return Type(section) != kShtNobits && Type(section) != kShtNull;
  }

  // "section 5 ('.text.k')", the name shown when the name table allows.
  std::string SectionLabel(uint64_t section) const {
    std::string label = absl::StrCat("section ", section);
    if (!names_ok_) return label;
    const uint64_t table = Offset(shstrndx_), table_size = Size(shstrndx_);
    const uint64_t name = b_.U32(Header(section));
    if (name >= table_size) return label;
    std::string text;
    for (uint64_t at = table + name; at < table + table_size && text.size() < 64; ++at) {
      const char c = static_cast<char>(b_.U8(at));
      if (c == '\0') break;
      text.push_back(c >= 0x20 && c < 0x7F ? c : '?');
    }
    if (text.empty()) return label;
    return absl::StrCat(label, " ('", text, "')");
  }

  absl::Status SectionRange(uint64_t i) {
    return NeedRange(w_, Part(SectionLabel(i)),
                     absl::StrFormat("sh_offset %u + sh_size %u", Offset(i), Size(i)), Offset(i),
                     Size(i), b_.size());
  }

  absl::Status SectionNameTable() {
    if (shstrndx_ == 0) return absl::OkStatus();
    if (shstrndx_ >= shnum_) {
      return Damaged(w_, absl::StrFormat("names section %u as its section-name table "
                                         "(e_shstrndx) but has %u sections",
                                         shstrndx_, shnum_));
    }
    if (!HasContent(shstrndx_)) {
      return Damaged(w_, absl::StrFormat("has a section-name table (section %u) without "
                                         "contents",
                                         shstrndx_));
    }
    VYRE_RETURN_IF_ERROR(SectionRange(shstrndx_));
    names_ok_ = true;
    return absl::OkStatus();
  }

  absl::Status Sections() {
    for (uint64_t i = 0; i < shnum_; ++i) {
      if (!HasContent(i)) continue;
      VYRE_RETURN_IF_ERROR(SectionRange(i));
    }
    return absl::OkStatus();
  }

  absl::Status Segments() {
    for (uint64_t i = 0; i < phnum_; ++i) {
      const uint64_t header = phoff_ + i * phentsize_;
      const uint64_t offset = b_.U64(header + 8), file_size = b_.U64(header + 32);
      VYRE_RETURN_IF_ERROR(
          NeedRange(w_, Part(absl::StrCat("segment ", i, " (program header ", i, ")")),
                    absl::StrFormat("p_offset %u + p_filesz %u", offset, file_size), offset,
                    file_size, b_.size()));
    }
    return absl::OkStatus();
  }

  // String tables end with a NUL, so a reader of any name in them stops
  // inside; every section name lies inside the name table.
  absl::Status StringTables() {
    for (uint64_t i = 0; i < shnum_; ++i) {
      if (Type(i) != kShtStrtab || Size(i) == 0) continue;
      if (b_.U8(Offset(i) + Size(i) - 1) != 0) {
        return Damaged(w_, absl::StrFormat("has a string table, %s, that does not end with a "
                                           "NUL byte",
                                           SectionLabel(i)));
      }
    }
    if (!names_ok_) return absl::OkStatus();
    for (uint64_t i = 0; i < shnum_; ++i) {
      const uint32_t name = b_.U32(Header(i));
      if (name != 0 && name >= Size(shstrndx_)) {
        return Damaged(w_, absl::StrFormat("gives section %u a name at byte %u of its "
                                           "section-name table, which has %u bytes",
                                           i, name, Size(shstrndx_)));
      }
    }
    return absl::OkStatus();
  }

  bool IsSymbolTable(uint64_t section) const {
    return Type(section) == kShtSymtab || Type(section) == kShtDynsym;
  }

  absl::Status LinkedSection(uint64_t i, const char* table, const char* linked,
                             bool (ElfCheck::*ok)(uint64_t) const) {
    const uint32_t link = Link(i);
    if (link == 0 || link >= shnum_ || !(this->*ok)(link)) {
      return Damaged(w_, absl::StrFormat("has a %s, %s, whose sh_link %u is not a %s (the "
                                         "cubin has %u sections)",
                                         table, SectionLabel(i), link, linked, shnum_));
    }
    return absl::OkStatus();
  }

  bool IsStringTable(uint64_t section) const { return Type(section) == kShtStrtab; }

  absl::Status EntrySizeAtLeast(uint64_t i, const char* table, uint64_t minimum) {
    if (EntrySize(i) < minimum) {
      return Damaged(w_, absl::StrFormat("has a %s, %s, with entries of %u bytes (sh_entsize) "
                                         "but each takes %u",
                                         table, SectionLabel(i), EntrySize(i), minimum));
    }
    return absl::OkStatus();
  }

  // Symbol tables: every name inside the linked string table, every section
  // index a section (or a reserved index).
  absl::Status SymbolTables() {
    for (uint64_t i = 0; i < shnum_; ++i) {
      if (!IsSymbolTable(i)) continue;
      VYRE_RETURN_IF_ERROR(EntrySizeAtLeast(i, "symbol table", kSymBytes));
      VYRE_RETURN_IF_ERROR(
          LinkedSection(i, "symbol table", "string table", &ElfCheck::IsStringTable));
      const uint64_t strings = Size(Link(i));
      const uint64_t count = Size(i) / EntrySize(i);
      for (uint64_t s = 0; s < count; ++s) {
        const uint64_t symbol = Offset(i) + s * EntrySize(i);
        const uint32_t name = b_.U32(symbol);
        const uint16_t shndx = b_.U16(symbol + 6);
        if (name != 0 && name >= strings) {
          return Damaged(w_, absl::StrFormat("has symbol %u in %s named at byte %u of a "
                                             "string table of %u bytes",
                                             s, SectionLabel(i), name, strings));
        }
        if (shndx < kShnLoreserve && shndx >= shnum_) {
          return Damaged(w_, absl::StrFormat("has symbol %u in %s in section %u, but the "
                                             "cubin has %u sections",
                                             s, SectionLabel(i), shndx, shnum_));
        }
      }
    }
    return absl::OkStatus();
  }

  // Relocation tables: a symbol table linked, a target section that exists,
  // every symbol index inside the symbol table.
  absl::Status RelocationTables() {
    for (uint64_t i = 0; i < shnum_; ++i) {
      if (Type(i) != kShtRel && Type(i) != kShtRela) continue;
      const char* table = Type(i) == kShtRel ? "relocation table (SHT_REL)"
                                             : "relocation table (SHT_RELA)";
      VYRE_RETURN_IF_ERROR(
          EntrySizeAtLeast(i, table, Type(i) == kShtRel ? kRelBytes : kRelaBytes));
      VYRE_RETURN_IF_ERROR(LinkedSection(i, table, "symbol table", &ElfCheck::IsSymbolTable));
      if (Info(i) >= shnum_) {
        return Damaged(w_, absl::StrFormat("has a %s, %s, for section %u (sh_info), but the "
                                           "cubin has %u sections",
                                           table, SectionLabel(i), Info(i), shnum_));
      }
      const uint64_t symbols = Size(Link(i)) / EntrySize(Link(i));
      const uint64_t count = Size(i) / EntrySize(i);
      for (uint64_t r = 0; r < count; ++r) {
        const uint64_t symbol = b_.U64(Offset(i) + r * EntrySize(i) + 8) >> 32;
        if (symbol >= symbols && symbol != 0) {
          return Damaged(w_, absl::StrFormat("has relocation %u in %s naming symbol %u, but "
                                             "its symbol table has %u",
                                             r, SectionLabel(i), symbol, symbols));
        }
      }
    }
    return absl::OkStatus();
  }

  const Where& w_;
  const Bytes b_;
  uint64_t phoff_ = 0, shoff_ = 0;
  uint64_t phentsize_ = 0, phnum_ = 0, shentsize_ = 0, shnum_ = 0, shstrndx_ = 0;
  bool names_ok_ = false;  // shstrndx_ names a section inside the image
};

// ---------------------------------------------------------------------------
// Fatbins
// ---------------------------------------------------------------------------

absl::Status CheckFatbin(const Where& w, Bytes b) {
  const std::string header = absl::StrCat(w.image, "'s header");
  VYRE_RETURN_IF_ERROR(NeedRange(w, header, "", 0, kFatbinHeaderBytes, b.size()));
  const uint16_t header_size = b.U16(6);
  const uint64_t fat_size = b.U64(8);
  if (header_size < kFatbinHeaderBytes) {
    return Damaged(w, absl::StrFormat("declares a header of %u bytes (headerSize) but its "
                                      "fields take %u",
                                      header_size, kFatbinHeaderBytes));
  }
  VYRE_RETURN_IF_ERROR(NeedRange(w, header, "headerSize", 0, header_size, b.size()));
  const std::string sizes = absl::StrFormat("headerSize %u + fatSize %u", header_size, fat_size);
  VYRE_RETURN_IF_ERROR(NeedRange(w, w.image, sizes, header_size, fat_size, b.size()));
  if (fat_size == 0) {
    return Invalid(w, absl::StrCat(w.image, " holds no entries (fatSize 0)"),
                   "build the fatbin with code for this GPU (nvcc -fatbin -arch=sm_XX)");
  }
  const uint64_t end = header_size + fat_size;  // proved inside b above
  Where in_fatbin = w;
  in_fatbin.given = absl::StrFormat("%s ends at byte %u (%s)", w.image, end, sizes);
  in_fatbin.fix = kFixDamaged;
  uint64_t entry = 0;
  for (uint64_t at = header_size; at < end; ++entry) {
    const std::string label = absl::StrFormat("%s's entry %u (at byte %u)", w.image, entry, at);
    VYRE_RETURN_IF_ERROR(
        NeedRange(in_fatbin, absl::StrCat(label, " header"), "", at, kFatbinEntryHeaderBytes, end));
    const uint16_t kind = b.U16(at);
    const uint32_t entry_header = b.U32(at + 4);
    const uint64_t payload_size = b.U64(at + 8);
    if (entry_header < kFatbinEntryHeaderBytes) {
      return Damaged(w, absl::StrFormat("has entry %u (at byte %u) with a header of %u bytes "
                                        "but its fields take %u",
                                        entry, at, entry_header, kFatbinEntryHeaderBytes));
    }
    VYRE_RETURN_IF_ERROR(NeedRange(in_fatbin, absl::StrCat(label, " header"), "its header size",
                                   at, entry_header, end));
    const uint64_t payload = at + entry_header;
    VYRE_RETURN_IF_ERROR(NeedRange(in_fatbin, absl::StrCat(label, " payload"),
                                   absl::StrFormat("at byte %u, %u bytes", payload, payload_size),
                                   payload, payload_size, end));
    const bool compressed = entry_header >= kFatbinFlagsOffset + 8 &&
                            (b.U64(at + kFatbinFlagsOffset) & kFatbinCompressedFlags) != 0;
    Bytes body = b.Sub(payload, payload_size);
    if (kind == kFatbinKindElf && !compressed && body.StartsWith(kElfMagicBytes)) {
      Where cubin{w.what, absl::StrFormat("the cubin in fatbin entry %u", entry),
                  absl::StrFormat("the entry's payload (at byte %u) is %u bytes", payload,
                                  payload_size),
                  kFixDamaged};
      VYRE_RETURN_IF_ERROR(ElfCheck(cubin, body).Run());
    }
    at = payload + payload_size;
  }
  return absl::OkStatus();
}

std::string FirstBytes(Bytes b) {
  std::string text;
  for (uint64_t i = 0; i < 4 && i < b.size(); ++i) {
    absl::StrAppendFormat(&text, "%s%02x", i == 0 ? "" : " ", b.U8(i));
  }
  return text;
}

}  // namespace

absl::StatusOr<BinaryFormat> CheckBinaryImage(const char* what, const void* image,
                                              size_t size) {
  if (size == 0) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: code_size is 0 for a binary image, which has no terminator to find its "
                  "end by. Fix: pass the image's size in bytes.",
                  what);
  }
  Bytes b(static_cast<const unsigned char*>(image), size);
  const std::string given = absl::StrFormat("code_size is %u", size);
  if (b.StartsWith(kElfMagicBytes) || b.PrefixOf(kElfMagicBytes)) {
    VYRE_RETURN_IF_ERROR(ElfCheck(Where{what, "the cubin", given, kFixWhole}, b).Run());
    return BinaryFormat::kCubin;
  }
  if (b.StartsWith(kFatbinMagicBytes) || b.PrefixOf(kFatbinMagicBytes)) {
    VYRE_RETURN_IF_ERROR(CheckFatbin(Where{what, "the fatbin", given, kFixWhole}, b));
    return BinaryFormat::kFatbin;
  }
  if (b.StartsWith(kFatbinWrapperMagicBytes)) {
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: the binary image is a fatbin wrapper (__fatBinC_Wrapper_t, magic "
                  "0x466243B1), which points at a fatbin elsewhere in memory. Fix: pass the "
                  "fatbin it points to (the wrapper's data field), with code_size its "
                  "headerSize + fatSize.",
                  what);
  }
  return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                "%s: the binary image starts with the bytes %s, which is neither a cubin (ELF, "
                "7f 45 4c 46) nor a fatbin (50 ed 55 ba). Fix: pass a cubin (nvcc -cubin) or "
                "fatbin (nvcc -fatbin) image with its size; give PTX text as VYRE_CODE_PTX and "
                "CUDA C++ source as VYRE_CODE_CUDA_SOURCE.",
                what, FirstBytes(b));
}

absl::Status CheckCodeText(const char* what, const char* kind, const char* text, size_t size) {
  const void* nul = std::memchr(text, '\0', size);
  if (nul == nullptr) return absl::OkStatus();
  const size_t at = static_cast<const char*>(nul) - text;
  return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                "%s: the %s has a NUL byte at offset %u, before code_size %u, so the compiler "
                "would silently drop the %u bytes after it. Fix: pass code_size as the text's "
                "length (NULs only at its end), or 0 for NUL-terminated text.",
                what, kind, at, size, size - at - 1);
}

absl::Status CheckPtxIsNotBinary(const char* what, const char* text, size_t size) {
  static constexpr struct {
    const unsigned char* magic;
    const char* name;
  } kBinaryMagics[] = {
      {kElfMagicBytes, "an ELF (cubin) image"},
      {kFatbinMagicBytes, "a fatbin"},
      {kFatbinWrapperMagicBytes, "a fatbin wrapper"},
  };
  if (size < 4) return absl::OkStatus();
  for (const auto& m : kBinaryMagics) {
    if (std::memcmp(text, m.magic, 4) != 0) continue;
    return Errorf(VYRE_STATUS_INVALID_ARGUMENT,
                  "%s: code_kind is VYRE_CODE_PTX but the code starts with the magic number of "
                  "%s, so the driver would read it as a binary image, past the end of the %u "
                  "bytes given. Fix: pass a cubin or fatbin as VYRE_CODE_BINARY with its exact "
                  "code_size, or pass PTX text.",
                  what, m.name, size);
  }
  return absl::OkStatus();
}

}  // namespace vyre
