// The layout every error message has, enforced where errors are made
// (MakeError) and stored (SetLastError):
//
//   <what failed>: <why>. Fix: <what to do>.          <- first line, <= 1023 bytes
//   <compiler or JIT log, capped>                      <- optional, after one '\n'
//   [log truncated: N more bytes; vyre_last_error_log returns all of it]
//
// The first line always fits in a 1 KiB buffer with its NUL and always ends
// with the Fix sentence: when caller-controlled text (an entry name, a file
// path, compile options) makes it longer, the middle of the part before
// "Fix:" is replaced by " [... N bytes elided ...] ", keeping what failed
// (the start) and the end of why; an absurdly long Fix keeps its start. Cuts
// never split a UTF-8 sequence. The whole message is at most 8191 bytes; the
// uncapped log travels separately (status payload, then the per-thread last
// error) for vyre_last_error_log.
#ifndef VYRE_BASE_MESSAGE_H_
#define VYRE_BASE_MESSAGE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace vyre {

// The most bytes of a message's first line (without '\n' or NUL).
inline constexpr size_t kMaxFirstLineBytes = 1023;
// The most bytes the Fix sentence keeps of the first line when the line must
// be shortened ("Fix: ... ." included).
inline constexpr size_t kMaxFixBytes = 512;
// The most bytes of a whole message (first line, '\n', capped log and note).
inline constexpr size_t kMaxMessageBytes = 8191;

// The Fix given to a first line that came without one (a vyre-cuda bug: every
// error is made with a Fix). Tests look for kMissingFixMarker.
inline constexpr char kMissingFixMarker[] = "the failure came without a Fix of its own";

// The largest index <= pos (and <= text.size()) that does not fall inside a
// UTF-8 sequence (continuation bytes 10xxxxxx are skipped backwards).
size_t Utf8FloorBoundary(absl::string_view text, size_t pos);
// The smallest index >= pos that does not fall inside a UTF-8 sequence
// (text.size() at most).
size_t Utf8CeilBoundary(absl::string_view text, size_t pos);

// `line` as a first line: line breaks, carriage returns and NULs become
// spaces, trailing spaces go, a Fix is added when none is present (see
// kMissingFixMarker), a final '.' is added when missing, and the result is
// shortened to kMaxFirstLineBytes as described above. Idempotent.
std::string ShapeFirstLine(absl::string_view line);

// `first_line` (already shaped) followed by '\n' and `log`, the log cut so the
// whole stays within kMaxMessageBytes and followed by a note saying how many
// bytes were left out. An empty log gives the first line alone.
std::string ComposeMessage(absl::string_view first_line, absl::string_view log);

// Splits a message at its first '\n': the first line and what follows it.
void SplitMessage(absl::string_view message, absl::string_view* first_line,
                  absl::string_view* rest);

}  // namespace vyre

#endif  // VYRE_BASE_MESSAGE_H_
