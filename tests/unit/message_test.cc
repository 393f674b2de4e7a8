// White-box tests of the message layout (src/base/message.h): first lines cut
// to 1023 bytes around caller text while keeping what failed and the whole
// Fix, logs capped in the message and kept whole for vyre_last_error_log, and
// cuts that never split a UTF-8 sequence.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/last_error.h"
#include "base/message.h"
#include "base/status.h"
#include "vyre_cuda.h"

namespace vyre {
namespace {

std::string FirstLine(const std::string& message) {
  return message.substr(0, message.find('\n'));
}

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Strict UTF-8: no truncated, overlong or stray sequences.
bool ValidUtf8(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > text.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// The layout every first line has, and the Fix sentence it must end with.
::testing::AssertionResult FirstLineOk(const std::string& message) {
  std::string line = FirstLine(message);
  if (line.size() > kMaxFirstLineBytes) {
    return ::testing::AssertionFailure() << "first line of " << line.size() << " bytes";
  }
  if (line.find(". Fix: ") == std::string::npos) {
    return ::testing::AssertionFailure() << "no \". Fix: \" in: " << line;
  }
  if (line.empty() || line.back() != '.') {
    return ::testing::AssertionFailure() << "does not end with '.': " << line;
  }
  if (!ValidUtf8(message)) return ::testing::AssertionFailure() << "invalid UTF-8: " << line;
  return ::testing::AssertionSuccess();
}

// The byte count a " [... N bytes elided ...]" marker in `line` names (-1 if
// there is none).
int64_t ElidedBytes(const std::string& line) {
  size_t at = line.find(" [... ");
  if (at == std::string::npos) return -1;
  return std::stoll(line.substr(at + 6));
}

std::string Repeat(const std::string& piece, size_t bytes) {
  std::string out;
  while (out.size() < bytes) out += piece;
  return out;
}

// ---------------------------------------------------------------------------
// First lines
// ---------------------------------------------------------------------------

TEST(MessageTest, ShortMessagesAreUnchanged) {
  for (const char* text : {"a: b. Fix: c.", "launching 'k': it broke. Fix: do better.",
                           "x: \xC3\xA9t\xC3\xA9. Fix: \xE2\x9C\x93 done."}) {
    absl::Status status = MakeError(VYRE_STATUS_INVALID_ARGUMENT, text);
    EXPECT_EQ(status.message(), text);
    EXPECT_TRUE(LogOf(status).empty());
  }
}

TEST(MessageTest, ALineOfExactly1023BytesIsKept) {
  std::string fix = " Fix: pass a shorter name.";
  // "creating '" and "': bad." are 17 bytes.
  std::string what = "creating '" + std::string(1023 - fix.size() - 17, 'n') + "': bad.";
  std::string line = what + fix;
  ASSERT_EQ(line.size(), 1023u);
  EXPECT_EQ(MakeError(VYRE_STATUS_INVALID_ARGUMENT, line).message(), line);
  std::string longer = "creating '" + std::string(1023 - fix.size() - 16, 'n') + "': bad." + fix;
  ASSERT_EQ(longer.size(), 1024u);
  std::string shaped(MakeError(VYRE_STATUS_INVALID_ARGUMENT, longer).message());
  EXPECT_TRUE(FirstLineOk(shaped));
  EXPECT_LE(shaped.size(), 1023u);
  EXPECT_TRUE(EndsWith(shaped, fix));
}

TEST(MessageTest, LongWhatKeepsItsStartAndTheWholeFix) {
  // A 5000-character kernel name in the "what" part.
  std::string name(5000, 'k');
  std::string fix = "Fix: declare the entry with extern \"C\" __global__.";
  std::string text = "loading entry 'prefix_" + name + "_suffix': not in the module. " + fix;
  absl::Status status = MakeError(VYRE_STATUS_ENTRY_NOT_FOUND, text);
  std::string line(status.message());
  EXPECT_TRUE(FirstLineOk(line)) << line;
  EXPECT_EQ(line.rfind("loading entry 'prefix_kkkk", 0), 0u) << "what failed is lost: " << line;
  EXPECT_TRUE(EndsWith(line, "_suffix': not in the module. " + fix)) << line;
  // Nothing but the middle went: kept + elided = original.
  int64_t elided = ElidedBytes(line);
  ASSERT_GT(elided, 0) << line;
  std::string marker = " [... " + std::to_string(elided) + " bytes elided ...] ";
  EXPECT_NE(line.find(marker), std::string::npos) << line;
  EXPECT_EQ(line.size() - marker.size() + static_cast<size_t>(elided), text.size());
  // The status and public code are untouched.
  EXPECT_EQ(PublicCode(status), VYRE_STATUS_ENTRY_NOT_FOUND);
}

TEST(MessageTest, LongWhyKeepsItsEnd) {
  std::string why = "the path /" + Repeat("very/long/directory/", 5000) + "libcuda.so.1 is absent";
  std::string text = "loading the CUDA driver: " + why + ". Fix: install the NVIDIA driver.";
  std::string line(MakeError(VYRE_STATUS_NO_DRIVER, text).message());
  EXPECT_TRUE(FirstLineOk(line)) << line;
  EXPECT_EQ(line.rfind("loading the CUDA driver: the path /very/long/", 0), 0u) << line;
  EXPECT_TRUE(EndsWith(line, "libcuda.so.1 is absent. Fix: install the NVIDIA driver.")) << line;
}

TEST(MessageTest, LongFixKeepsItsStart) {
  std::string fix = "Fix: pass one of " + Repeat("'an_option_name', ", 1000) + "and nothing else.";
  std::string text = "compiling 'k': unknown option. " + fix;
  std::string line(MakeError(VYRE_STATUS_COMPILE_FAILED, text).message());
  EXPECT_TRUE(FirstLineOk(line)) << line;
  EXPECT_EQ(line.rfind("compiling 'k': unknown option. Fix: pass one of 'an_option_name', ", 0),
            0u)
      << "the short what and the start of the Fix must survive: " << line;
  EXPECT_TRUE(EndsWith(line, " bytes elided ...].")) << line;
  // The Fix took at most its share.
  EXPECT_LE(line.size() - line.find("Fix: "), kMaxFixBytes);
}

TEST(MessageTest, EverythingLong) {
  std::string text = "creating '" + std::string(10000, 'w') + "': " + std::string(10000, 'y') +
                     ". Fix: " + std::string(10000, 'f') + ".";
  std::string line(MakeError(VYRE_STATUS_INVALID_ARGUMENT, text).message());
  EXPECT_TRUE(FirstLineOk(line)) << line;
  EXPECT_EQ(line.rfind("creating 'wwww", 0), 0u);
  EXPECT_NE(line.find("yyyy. Fix: ffff"), std::string::npos) << line;
}

TEST(MessageTest, CutsNeverSplitUtf8) {
  // 2-, 3- and 4-byte characters, shifted by 0..4 ASCII bytes so every cut
  // point lands at every position inside a sequence.
  for (const std::string& ch : {std::string("\xC3\xA9"), std::string("\xE2\x9C\x93"),
                                std::string("\xF0\x9F\x98\x80")}) {
    for (size_t shift = 0; shift < 5; ++shift) {
      std::string pad(shift, 'a');
      std::string name = Repeat(ch, 3000);
      std::string fix_name = Repeat(ch, 1000);
      std::string text = pad + "loading '" + name + "': " + pad + name + " is bad. Fix: rename '" +
                         pad + fix_name + "'.";
      std::string line(MakeError(VYRE_STATUS_INVALID_ARGUMENT, text).message());
      EXPECT_TRUE(FirstLineOk(line)) << ch.size() << "-byte, shift " << shift << ": " << line;
    }
  }
}

TEST(MessageTest, InvalidUtf8DoesNotBreakTheLimit) {
  // Bytes that are all continuation bytes: no boundary to find, still cut.
  std::string junk(5000, '\x80');
  std::string line(
      MakeError(VYRE_STATUS_INVALID_ARGUMENT, "x '" + junk + "': bad. Fix: do y.").message());
  EXPECT_LE(line.size(), kMaxFirstLineBytes);
  EXPECT_TRUE(EndsWith(line, ". Fix: do y."));
}

TEST(MessageTest, LineBreaksInCallerTextStayOnTheFirstLine) {
  absl::Status status =
      MakeError(VYRE_STATUS_ENTRY_NOT_FOUND, "loading 'evil\nname\r': absent. Fix: rename it.");
  std::string line(status.message());
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.find('\r'), std::string::npos);
  EXPECT_TRUE(FirstLineOk(line)) << line;
  std::string with_nul("a 'b\0c': d. Fix: e.", 19);
  EXPECT_EQ(std::string(MakeError(VYRE_STATUS_INVALID_ARGUMENT, with_nul).message()),
            "a 'b c': d. Fix: e.");
}

TEST(MessageTest, AMissingFixOrFinalPeriodIsSupplied) {
  std::string no_fix(MakeError(VYRE_STATUS_INTERNAL, "doing x: it failed").message());
  EXPECT_TRUE(FirstLineOk(no_fix)) << no_fix;
  EXPECT_EQ(no_fix.rfind("doing x: it failed. Fix: ", 0), 0u) << no_fix;
  EXPECT_NE(no_fix.find(kMissingFixMarker), std::string::npos);
  std::string no_period(MakeError(VYRE_STATUS_INTERNAL, "x: y. Fix: z  ").message());
  EXPECT_EQ(no_period, "x: y. Fix: z.");
  std::string empty(MakeError(VYRE_STATUS_INTERNAL, "").message());
  EXPECT_TRUE(FirstLineOk(empty)) << empty;
  // A long message without a Fix still gets one, within the limit.
  std::string long_no_fix(MakeError(VYRE_STATUS_INTERNAL, std::string(4000, 'z')).message());
  EXPECT_TRUE(FirstLineOk(long_no_fix)) << long_no_fix;
}

TEST(MessageTest, TheLastFixWins) {
  // Caller text holding ". Fix: " before the real Fix cannot displace it.
  std::string text = "loading '" + std::string(3000, 'n') + ". Fix: fake" +
                     std::string(3000, 'm') + "': absent. Fix: the real one.";
  std::string line(MakeError(VYRE_STATUS_ENTRY_NOT_FOUND, text).message());
  EXPECT_TRUE(FirstLineOk(line)) << line;
  EXPECT_TRUE(EndsWith(line, "': absent. Fix: the real one.")) << line;
}

TEST(MessageTest, ShapingIsIdempotent) {
  std::vector<std::string> inputs = {
      "a: b. Fix: c.", std::string(5000, 'x') + ". Fix: y.",
      "z: " + Repeat("\xE2\x9C\x93", 2000) + ". Fix: " + Repeat("\xC3\xA9", 2000) + ".",
      "no fix at all", ""};
  for (const std::string& input : inputs) {
    std::string once = ShapeFirstLine(input);
    EXPECT_EQ(ShapeFirstLine(once), once);
  }
}

TEST(MessageTest, Utf8Boundaries) {
  std::string text = "a\xC3\xA9" "b\xF0\x9F\x98\x80";  // a é b 😀
  EXPECT_EQ(Utf8FloorBoundary(text, 0), 0u);
  EXPECT_EQ(Utf8FloorBoundary(text, 2), 1u);
  EXPECT_EQ(Utf8CeilBoundary(text, 2), 3u);
  EXPECT_EQ(Utf8FloorBoundary(text, 6), 4u);
  EXPECT_EQ(Utf8CeilBoundary(text, 6), 8u);
  EXPECT_EQ(Utf8FloorBoundary(text, 100), text.size());
  EXPECT_EQ(Utf8CeilBoundary(text, 100), text.size());
}

// ---------------------------------------------------------------------------
// Logs
// ---------------------------------------------------------------------------

TEST(MessageTest, AnEmptyLogAddsNothing) {
  absl::Status status = MakeErrorWithLog(VYRE_STATUS_COMPILE_FAILED, "c: bad. Fix: f.", "");
  EXPECT_EQ(status.message(), "c: bad. Fix: f.");
  EXPECT_TRUE(LogOf(status).empty());
}

TEST(MessageTest, AShortLogFollowsTheFirstLineWhole) {
  std::string log = "line 1: error: x\nline 2: error: y";
  absl::Status status = MakeErrorWithLog(VYRE_STATUS_COMPILE_FAILED, "c: bad. Fix: f.", log, 218);
  EXPECT_EQ(status.message(), "c: bad. Fix: f.\n" + log);
  EXPECT_EQ(LogOf(status), log);
  EXPECT_EQ(PublicCode(status), VYRE_STATUS_COMPILE_FAILED);
  EXPECT_EQ(CuResultOf(status), 218);
}

TEST(MessageTest, AHugeLogIsCappedInTheMessageAndKeptWhole) {
  std::string log = Repeat("ptxas: line 7: error: \xE2\x9C\x93 bad\n", 1 << 20);
  log.resize(1 << 20);  // 1 MiB, cut inside a sequence on purpose
  std::string name(5000, 'k');
  absl::Status status = MakeErrorWithLog(
      VYRE_STATUS_COMPILE_FAILED, "loading '" + name + "': invalid PTX. Fix: correct the code.",
      log);
  std::string message(status.message());
  EXPECT_TRUE(FirstLineOk(FirstLine(message))) << FirstLine(message);
  EXPECT_LE(message.size(), kMaxMessageBytes);
  EXPECT_TRUE(ValidUtf8(message.substr(0, message.rfind('\n'))));
  size_t note = message.find("\n[log truncated: ");
  ASSERT_NE(note, std::string::npos);
  size_t kept = note - (FirstLine(message).size() + 1);
  EXPECT_TRUE(EndsWith(message, "[log truncated: " + std::to_string(log.size() - kept) +
                                    " more bytes; vyre_last_error_log returns all of it]"))
      << message.substr(note);
  EXPECT_EQ(message.substr(FirstLine(message).size() + 1, kept), log.substr(0, kept));
  EXPECT_EQ(LogOf(status), log);
}

TEST(MessageTest, ALogThatJustFitsIsNotCut) {
  std::string line = "c: bad. Fix: f.";
  std::string log(kMaxMessageBytes - line.size() - 1, 'L');
  std::string message(MakeErrorWithLog(VYRE_STATUS_COMPILE_FAILED, line, log).message());
  EXPECT_EQ(message, line + "\n" + log);
  log.push_back('L');
  message = std::string(MakeErrorWithLog(VYRE_STATUS_COMPILE_FAILED, line, log).message());
  EXPECT_LE(message.size(), kMaxMessageBytes);
  EXPECT_NE(message.find("[log truncated: "), std::string::npos);
}

TEST(MessageTest, WithLogKeepsCodeAndCuResult) {
  absl::Status base = MakeError(VYRE_STATUS_COMPILE_FAILED, "l: bad. Fix: f.", 200);
  absl::Status status = WithLog(base, "the log");
  EXPECT_EQ(PublicCode(status), VYRE_STATUS_COMPILE_FAILED);
  EXPECT_EQ(CuResultOf(status), 200);
  EXPECT_EQ(status.message(), "l: bad. Fix: f.\nthe log");
  EXPECT_TRUE(WithLog(absl::OkStatus(), "log").ok());
  EXPECT_EQ(WithLog(base, ""), base);
}

// ---------------------------------------------------------------------------
// The per-thread last error
// ---------------------------------------------------------------------------

TEST(LastErrorLogTest, TheWholeLogIsReadBackByteForByte) {
  std::string log = Repeat("error: \xC3\xA9 at line 12\n", 1 << 20);
  log.resize((1 << 20) + 17);
  std::string name(10000, 'n');
  vyre_status code = SetLastError(MakeErrorWithLog(
      VYRE_STATUS_COMPILE_FAILED, "compiling '" + name + "': failed. Fix: correct the code.",
      log, 218));
  EXPECT_EQ(code, VYRE_STATUS_COMPILE_FAILED);

  // A caller with a 1 KiB buffer sees the whole first line and the Fix.
  char small[1024];
  size_t length = 0;
  vyre_status status = VYRE_STATUS_OK;
  int32_t cu_result = 0;
  EXPECT_EQ(ReadLastError(&status, &cu_result, small, sizeof(small), &length),
            VYRE_STATUS_COMPILE_FAILED);
  EXPECT_EQ(cu_result, 218);
  EXPECT_LE(length, kMaxMessageBytes);
  std::string seen(small);
  EXPECT_EQ(seen.size(), 1023u);
  std::vector<char> full(length + 1);
  ReadLastError(nullptr, nullptr, full.data(), full.size(), nullptr);
  std::string first_line = FirstLine(full.data());
  EXPECT_EQ(seen.substr(0, first_line.size()), first_line);
  EXPECT_TRUE(FirstLineOk(first_line)) << first_line;
  EXPECT_TRUE(EndsWith(first_line, "': failed. Fix: correct the code."));

  // The log call: length first, then all of it.
  size_t log_length = 0;
  EXPECT_EQ(ReadLastErrorLog(nullptr, 0, &log_length), VYRE_STATUS_COMPILE_FAILED);
  EXPECT_EQ(log_length, log.size());
  std::vector<char> buffer(log_length + 1, '\x7f');
  EXPECT_EQ(ReadLastErrorLog(buffer.data(), buffer.size(), nullptr), VYRE_STATUS_COMPILE_FAILED);
  EXPECT_EQ(std::string(buffer.data(), log_length), log);
  EXPECT_EQ(buffer[log_length], '\0');

  // Truncated reads stay terminated; capacity 0 and NULLs write nothing.
  char tiny[8];
  std::memset(tiny, 'x', sizeof(tiny));
  EXPECT_EQ(ReadLastErrorLog(tiny, sizeof(tiny), &log_length), VYRE_STATUS_COMPILE_FAILED);
  EXPECT_EQ(std::string(tiny), log.substr(0, 7));
  EXPECT_EQ(log_length, log.size());
  char untouched = 'u';
  ReadLastErrorLog(&untouched, 0, nullptr);
  EXPECT_EQ(untouched, 'u');
  EXPECT_EQ(ReadLastErrorLog(nullptr, 0, nullptr), VYRE_STATUS_COMPILE_FAILED);

  // Reading cleared nothing; clearing empties the log.
  EXPECT_EQ(ReadLastError(nullptr, nullptr, nullptr, 0, nullptr), VYRE_STATUS_COMPILE_FAILED);
  ClearLastError();
  EXPECT_EQ(ReadLastErrorLog(buffer.data(), buffer.size(), &log_length), VYRE_STATUS_OK);
  EXPECT_EQ(log_length, 0u);
  EXPECT_STREQ(buffer.data(), "");
}

TEST(LastErrorLogTest, AnErrorWithoutALogHasAnEmptyOne) {
  SetLastError(MakeErrorWithLog(VYRE_STATUS_COMPILE_FAILED, "a: b. Fix: c.", "some log"));
  SetLastError(MakeError(VYRE_STATUS_INVALID_ARGUMENT, "d: e. Fix: f."));
  size_t length = 99;
  char log[16] = "stale";
  EXPECT_EQ(ReadLastErrorLog(log, sizeof(log), &length), VYRE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(length, 0u);
  EXPECT_STREQ(log, "");
  ClearLastError();
}

TEST(LastErrorLogTest, ForeignStatusesAreShapedToo) {
  // A status not made by MakeError: its first line is shaped when stored, and
  // what follows it counts as its log.
  std::string text = std::string(3000, 'q') + "\nthe rest";
  EXPECT_EQ(SetLastError(absl::InternalError(text)), VYRE_STATUS_INTERNAL);
  size_t length = 0;
  EXPECT_EQ(ReadLastError(nullptr, nullptr, nullptr, 0, &length), VYRE_STATUS_INTERNAL);
  std::vector<char> message(length + 1);
  ReadLastError(nullptr, nullptr, message.data(), message.size(), nullptr);
  EXPECT_TRUE(FirstLineOk(message.data())) << message.data();
  EXPECT_TRUE(EndsWith(message.data(), "\nthe rest"));
  char log[32];
  ReadLastErrorLog(log, sizeof(log), &length);
  EXPECT_STREQ(log, "the rest");
  // An OK status clears.
  EXPECT_EQ(SetLastError(absl::OkStatus()), VYRE_STATUS_OK);
  EXPECT_EQ(ReadLastError(nullptr, nullptr, nullptr, 0, &length), VYRE_STATUS_OK);
  EXPECT_EQ(length, 0u);
}

TEST(LastErrorLogTest, TheLogIsPerThread) {
  SetLastError(MakeErrorWithLog(VYRE_STATUS_COMPILE_FAILED, "a: b. Fix: c.", "main log"));
  size_t other_length = 99;
  std::thread([&] { ReadLastErrorLog(nullptr, 0, &other_length); }).join();
  EXPECT_EQ(other_length, 0u);
  size_t length = 0;
  ReadLastErrorLog(nullptr, 0, &length);
  EXPECT_EQ(length, std::strlen("main log"));
  ClearLastError();
}

}  // namespace
}  // namespace vyre
