#include "base/message.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace vyre {
namespace {

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Where the Fix sentence of `line` starts ("Fix: ..."), or npos. The last
// ". Fix: " wins: caller text before it (an entry name that happens to hold
// "Fix: ") cannot move it.
size_t FindFix(absl::string_view line) {
  size_t at = line.rfind(". Fix: ");
  if (at != absl::string_view::npos) return at + 2;
  return line.rfind("Fix: ");
}

std::string Elided(size_t bytes, absl::string_view after) {
  return absl::StrCat(" [... ", bytes, " bytes elided ...]", after);
}

// Shortens `line` (which ends with its Fix sentence starting at `fix`) to
// kMaxFirstLineBytes.
std::string Shorten(absl::string_view line, size_t fix) {
  absl::string_view head = line.substr(0, fix);
  absl::string_view tail = line.substr(fix);
  std::string fix_part;
  if (tail.size() > kMaxFixBytes) {
    // Keep the start of the Fix; the marker closes the sentence.
    size_t marker = Elided(tail.size(), ".").size();
    size_t keep = Utf8FloorBoundary(tail, kMaxFixBytes - marker);
    fix_part = absl::StrCat(tail.substr(0, keep), Elided(tail.size() - keep, "."));
  } else {
    fix_part = std::string(tail);
  }
  size_t budget = kMaxFirstLineBytes - fix_part.size();
  if (head.size() <= budget) return absl::StrCat(head, fix_part);
  // Keep the start (what failed) and the end (the last of why), two to one.
  size_t room = budget - Elided(head.size(), " ").size();
  size_t back = room / 3;
  size_t front = room - back;
  size_t a = Utf8FloorBoundary(head, front);
  size_t b = Utf8CeilBoundary(head, head.size() - back);
  return absl::StrCat(head.substr(0, a), Elided(b - a, " "), head.substr(b), fix_part);
}

}  // namespace

size_t Utf8FloorBoundary(absl::string_view text, size_t pos) {
  pos = std::min(pos, text.size());
  // A valid sequence has at most three continuation bytes; past that the text
  // is not UTF-8 and any cut will do.
  for (int step = 0; step < 3 && pos > 0 && pos < text.size() && IsContinuation(text[pos]);
       ++step) {
    --pos;
  }
  return pos;
}

size_t Utf8CeilBoundary(absl::string_view text, size_t pos) {
  pos = std::min(pos, text.size());
  for (int step = 0; step < 3 && pos < text.size() && IsContinuation(text[pos]); ++step) ++pos;
  return pos;
}

std::string ShapeFirstLine(absl::string_view line) {
  std::string s(line);
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\0') c = ' ';
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t fix = FindFix(s);
  if (fix == std::string::npos) {
    if (s.empty()) s = "a vyre-cuda call failed";
    if (s.back() != '.') s.push_back('.');
    s.push_back(' ');
    fix = s.size();
    absl::StrAppend(&s, "Fix: report this message to the vyre-cuda maintainers (",
                    kMissingFixMarker, ").");
  }
  if (s.back() != '.') s.push_back('.');
  if (s.size() <= kMaxFirstLineBytes) return s;
  return Shorten(s, fix);
}

std::string ComposeMessage(absl::string_view first_line, absl::string_view log) {
  if (log.empty()) return std::string(first_line);
  size_t used = std::min(first_line.size(), kMaxFirstLineBytes) + 1;
  size_t room = kMaxMessageBytes - used;
  if (first_line.size() + 1 + log.size() <= kMaxMessageBytes) {
    return absl::StrCat(first_line, "\n", log);
  }
  auto note = [](size_t bytes) {
    return absl::StrCat("\n[log truncated: ", bytes,
                        " more bytes; vyre_last_error_log returns all of it]");
  };
  size_t keep = Utf8FloorBoundary(log, room - note(log.size()).size());
  return absl::StrCat(first_line.substr(0, kMaxFirstLineBytes), "\n", log.substr(0, keep),
                      note(log.size() - keep));
}

void SplitMessage(absl::string_view message, absl::string_view* first_line,
                  absl::string_view* rest) {
  size_t newline = message.find('\n');
  if (newline == absl::string_view::npos) {
    *first_line = message;
    *rest = absl::string_view();
  } else {
    *first_line = message.substr(0, newline);
    *rest = message.substr(newline + 1);
  }
}

}  // namespace vyre
