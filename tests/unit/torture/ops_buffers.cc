// The torture operations on buffers: allocate, free, query, and uploads and
// downloads (single and ranged) checked against each buffer's shadow.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "arguments.h"
#include "torture.h"

namespace vyre_test {
namespace torture {

void Torture::BufferAlloc() {
  if (pop_.buffers.size() >= kMaxBuffers) {
    BufferFree();
    return;
  }
  HandleChoice choice;
  vyre_context context{PickContextHandle(&choice)};
  uint64_t bytes = rng_.Range(1, kMaxBufferBytes);
  bool huge = false;
  switch (rng_.Below(30)) {
    case 0: bytes = 0; break;
    case 1: bytes = UINT64_MAX - rng_.Below(4096); huge = true; break;
    case 2: bytes = uint64_t{1} << rng_.Range(31, 62); huge = true; break;
    case 3: bytes = rng_.Range(1, 64); break;
    default: break;
  }
  bool null_out = rng_.Chance(0.03);
  vyre_buffer out{0};
  vyre_status s = Check(vyre_buffer_alloc(context, bytes, null_out ? nullptr : &out),
                        "vyre_buffer_alloc");
  ExpectNotOk(s, choice, "vyre_buffer_alloc");
  if (choice == HandleChoice::kValid && !null_out) {
    if (bytes == 0) ExpectStatus(s, VYRE_STATUS_INVALID_ARGUMENT, "vyre_buffer_alloc(0)");
    if (huge && s == VYRE_STATUS_OK) Fail("allocated " + std::to_string(bytes) + " bytes");
    if (bytes != 0 && !huge) ExpectStatus(s, VYRE_STATUS_OK, "vyre_buffer_alloc");
  }
  if (s == VYRE_STATUS_OK) {
    if (null_out) {
      Fail("vyre_buffer_alloc accepted a NULL out");
      return;
    }
    BufferState b;
    b.handle = out;
    b.context = context.bits;
    b.bytes = bytes;
    b.shadow.assign(bytes, 0);
    b.known.assign(bytes, 0);
    pop_.buffers.push_back(std::move(b));
  }
}

void Torture::BufferFree() {
  int index;
  HandleChoice choice;
  vyre_buffer buffer{PickBufferHandle(&index, &choice)};
  vyre_status s = Check(vyre_buffer_free(buffer), "vyre_buffer_free");
  ExpectNotOk(s, choice, "vyre_buffer_free");
  if (choice == HandleChoice::kValid) {
    ExpectStatus(s, VYRE_STATUS_OK, "vyre_buffer_free");
    ForgetBuffer(size_t(index));
  }
}

void Torture::BufferInfo() {
  int index;
  HandleChoice choice;
  vyre_buffer buffer{PickBufferHandle(&index, &choice)};
  WithTail<vyre_buffer_info> info{VYRE_BUFFER_INFO_INIT, {}};
  bool well_formed = choice == HandleChoice::kValid;
  RandomizeStructSize(&rng_, &info, &well_formed);
  vyre_status s = Check(vyre_buffer_info_get(buffer, &info.value), "vyre_buffer_info_get");
  ExpectNotOk(s, choice, "vyre_buffer_info_get");
  if (well_formed) {
    ExpectStatus(s, VYRE_STATUS_OK, "vyre_buffer_info_get");
    const BufferState& b = pop_.buffers[size_t(index)];
    if (s == VYRE_STATUS_OK && (info.value.bytes != b.bytes || info.value.context.bits != b.context ||
                                info.value.device_pointer == 0)) {
      Fail("vyre_buffer_info_get reports " + std::to_string(info.value.bytes) + " bytes, expected " +
           std::to_string(b.bytes));
    }
  }
}

void Torture::Upload() {
  int index;
  HandleChoice choice;
  vyre_buffer buffer{PickBufferHandle(&index, &choice)};
  uint64_t size = index >= 0 ? pop_.buffers[size_t(index)].bytes : rng_.Range(1, kMaxBufferBytes);
  uint64_t offset = RandomOffset(size);
  uint64_t bytes = RandomLength(size, offset);
  std::vector<uint8_t> data = RandomBytes(bytes);
  bool null_src = rng_.Chance(0.03);
  vyre_status s = Check(vyre_buffer_upload(buffer, offset, null_src ? nullptr : data.data(), bytes),
                        "vyre_buffer_upload");
  ExpectNotOk(s, choice, "vyre_buffer_upload");
  if (choice != HandleChoice::kValid) return;
  if (null_src && bytes > 0) {
    if (s == VYRE_STATUS_OK) Fail("vyre_buffer_upload accepted a NULL src");
    return;
  }
  if (!InRange(offset, bytes, size)) {
    ExpectStatus(s, VYRE_STATUS_OUT_OF_RANGE, "vyre_buffer_upload");
    return;
  }
  if (!null_src) ExpectStatus(s, VYRE_STATUS_OK, "vyre_buffer_upload");
  if (s == VYRE_STATUS_OK && !null_src) {
    BufferState& b = pop_.buffers[size_t(index)];
    std::copy(data.begin(), data.end(), b.shadow.begin() + offset);
    std::fill(b.known.begin() + offset, b.known.begin() + offset + bytes, 1);
  }
}

// vyre_buffer_copy between two buffers (perhaps the same one, perhaps of two
// contexts): out-of-range and overlapping ranges are refused, anything else
// copies the source's shadow (known bytes and unknown ones alike, since the
// copy runs after the work already enqueued on both contexts).
void Torture::BufferCopy() {
  int src_index, dst_index;
  HandleChoice src_choice, dst_choice;
  vyre_buffer src{PickBufferHandle(&src_index, &src_choice)};
  vyre_buffer dst{PickBufferHandle(&dst_index, &dst_choice)};
  if (src_index >= 0 && dst_index >= 0 && src_index != dst_index && rng_.Chance(0.2)) {
    dst = src;  // one buffer: overlapping ranges come up often
    dst_index = src_index;
  }
  const uint64_t src_size =
      src_index >= 0 ? pop_.buffers[size_t(src_index)].bytes : rng_.Range(1, kMaxBufferBytes);
  const uint64_t dst_size =
      dst_index >= 0 ? pop_.buffers[size_t(dst_index)].bytes : rng_.Range(1, kMaxBufferBytes);
  vyre_buffer_copy_desc desc = VYRE_BUFFER_COPY_DESC_INIT;
  desc.src = src;
  desc.dst = dst;
  desc.src_offset = RandomOffset(src_size);
  desc.dst_offset = RandomOffset(dst_size);
  desc.bytes = RandomLength(std::min(src_size, dst_size),
                            std::max(desc.src_offset, desc.dst_offset));
  vyre_status s = Check(vyre_buffer_copy(&desc), "vyre_buffer_copy");
  ExpectNotOk(s, src_choice, "vyre_buffer_copy");
  ExpectNotOk(s, dst_choice, "vyre_buffer_copy");
  if (src_choice != HandleChoice::kValid || dst_choice != HandleChoice::kValid) return;
  if (!InRange(desc.src_offset, desc.bytes, src_size) ||
      !InRange(desc.dst_offset, desc.bytes, dst_size)) {
    ExpectStatus(s, VYRE_STATUS_OUT_OF_RANGE, "vyre_buffer_copy");
    return;
  }
  if (src_index == dst_index && desc.bytes > 0 &&
      desc.src_offset < desc.dst_offset + desc.bytes &&
      desc.dst_offset < desc.src_offset + desc.bytes) {
    ExpectStatus(s, VYRE_STATUS_INVALID_ARGUMENT, "vyre_buffer_copy (overlap)");
    return;
  }
  ExpectStatus(s, VYRE_STATUS_OK, "vyre_buffer_copy");
  if (s != VYRE_STATUS_OK) return;
  const BufferState& from = pop_.buffers[size_t(src_index)];
  BufferState& to = pop_.buffers[size_t(dst_index)];
  const auto first = static_cast<std::ptrdiff_t>(desc.src_offset);
  const auto last = static_cast<std::ptrdiff_t>(desc.src_offset + desc.bytes);
  const auto at = static_cast<std::ptrdiff_t>(desc.dst_offset);
  std::copy(from.shadow.begin() + first, from.shadow.begin() + last, to.shadow.begin() + at);
  std::copy(from.known.begin() + first, from.known.begin() + last, to.known.begin() + at);
}

namespace {

// Compares downloaded bytes with the shadow where the shadow is known.
bool SameAsShadow(const BufferState& b, uint64_t offset, const uint8_t* data, uint64_t bytes,
                  std::string* why) {
  for (uint64_t i = 0; i < bytes; ++i) {
    if (b.known[offset + i] && b.shadow[offset + i] != data[i]) {
      *why = "byte " + std::to_string(offset + i) + " of a " + std::to_string(b.bytes) +
             "-byte buffer is " + std::to_string(data[i]) + ", expected " +
             std::to_string(b.shadow[offset + i]);
      return false;
    }
  }
  return true;
}

}  // namespace

void Torture::Download() {
  int index;
  HandleChoice choice;
  vyre_buffer buffer{PickBufferHandle(&index, &choice)};
  uint64_t size = index >= 0 ? pop_.buffers[size_t(index)].bytes : rng_.Range(1, kMaxBufferBytes);
  uint64_t offset = RandomOffset(size);
  uint64_t bytes = RandomLength(size, offset);
  std::vector<uint8_t> data(bytes, kPoisonByte);
  bool null_dst = rng_.Chance(0.03);
  vyre_status s =
      Check(vyre_buffer_download(buffer, offset, null_dst ? nullptr : data.data(), bytes),
            "vyre_buffer_download");
  ExpectNotOk(s, choice, "vyre_buffer_download");
  if (choice != HandleChoice::kValid) return;
  if (null_dst && bytes > 0) {
    if (s == VYRE_STATUS_OK) Fail("vyre_buffer_download accepted a NULL dst");
    return;
  }
  if (!InRange(offset, bytes, size)) {
    ExpectStatus(s, VYRE_STATUS_OUT_OF_RANGE, "vyre_buffer_download");
    return;
  }
  if (!null_dst) ExpectStatus(s, VYRE_STATUS_OK, "vyre_buffer_download");
  std::string why;
  if (s == VYRE_STATUS_OK && !null_dst &&
      !SameAsShadow(pop_.buffers[size_t(index)], offset, data.data(), bytes, &why)) {
    Fail("vyre_buffer_download: " + why);
  }
}

void Torture::UploadRanges() {
  int index;
  HandleChoice choice;
  vyre_buffer buffer{PickBufferHandle(&index, &choice)};
  uint64_t size = index >= 0 ? pop_.buffers[size_t(index)].bytes : rng_.Range(1, kMaxBufferBytes);
  size_t count = size_t(rng_.Below(5));
  std::vector<std::vector<uint8_t>> data(count);
  std::vector<vyre_upload_range> ranges(count);
  bool all_in_range = true;
  bool null_src = false;
  for (size_t i = 0; i < count; ++i) {
    ranges[i].offset = RandomOffset(size);
    ranges[i].bytes = rng_.Chance(0.8) ? std::min<uint64_t>(RandomLength(size, ranges[i].offset), 8192)
                                       : RandomLength(size, ranges[i].offset);
    data[i] = RandomBytes(ranges[i].bytes);
    ranges[i].src = data[i].data();
    if (rng_.Chance(0.02)) {
      ranges[i].src = nullptr;
      null_src |= ranges[i].bytes > 0;
    }
    all_in_range &= InRange(ranges[i].offset, ranges[i].bytes, size);
  }
  bool null_ranges = count > 0 && rng_.Chance(0.03);
  vyre_status s = Check(vyre_buffer_upload_ranges(buffer, null_ranges ? nullptr : ranges.data(),
                                                  count),
                        "vyre_buffer_upload_ranges");
  if (!RangesCallAsExpected(s, choice, null_ranges || null_src, all_in_range,
                            "vyre_buffer_upload_ranges")) {
    return;
  }
  BufferState& b = pop_.buffers[size_t(index)];
  for (size_t i = 0; i < count; ++i) {
    std::copy(data[i].begin(), data[i].end(), b.shadow.begin() + ranges[i].offset);
    std::fill(b.known.begin() + ranges[i].offset,
              b.known.begin() + ranges[i].offset + ranges[i].bytes, 1);
  }
  // Overlapping ranges: which one lands last is not promised.
  for (size_t i = 0; i < count; ++i) {
    for (size_t j = i + 1; j < count; ++j) {
      uint64_t lo = std::max(ranges[i].offset, ranges[j].offset);
      uint64_t hi = std::min(ranges[i].offset + ranges[i].bytes, ranges[j].offset + ranges[j].bytes);
      if (lo < hi) std::fill(b.known.begin() + lo, b.known.begin() + hi, 0);
    }
  }
}

void Torture::DownloadRanges() {
  int index;
  HandleChoice choice;
  vyre_buffer buffer{PickBufferHandle(&index, &choice)};
  uint64_t size = index >= 0 ? pop_.buffers[size_t(index)].bytes : rng_.Range(1, kMaxBufferBytes);
  size_t count = size_t(rng_.Below(5));
  std::vector<std::vector<uint8_t>> data(count);
  std::vector<vyre_download_range> ranges(count);
  bool all_in_range = true;
  bool null_dst = false;
  for (size_t i = 0; i < count; ++i) {
    ranges[i].offset = RandomOffset(size);
    ranges[i].bytes = rng_.Chance(0.8) ? std::min<uint64_t>(RandomLength(size, ranges[i].offset), 8192)
                                       : RandomLength(size, ranges[i].offset);
    data[i].assign(ranges[i].bytes, kPoisonByte);
    ranges[i].dst = data[i].data();
    if (rng_.Chance(0.02)) {
      ranges[i].dst = nullptr;
      null_dst |= ranges[i].bytes > 0;
    }
    all_in_range &= InRange(ranges[i].offset, ranges[i].bytes, size);
  }
  bool null_ranges = count > 0 && rng_.Chance(0.03);
  vyre_status s = Check(vyre_buffer_download_ranges(buffer, null_ranges ? nullptr : ranges.data(),
                                                    count),
                        "vyre_buffer_download_ranges");
  if (!RangesCallAsExpected(s, choice, null_ranges || null_dst, all_in_range,
                            "vyre_buffer_download_ranges")) {
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    std::string why;
    if (!SameAsShadow(pop_.buffers[size_t(index)], ranges[i].offset, data[i].data(),
                      ranges[i].bytes, &why)) {
      Fail("vyre_buffer_download_ranges range " + std::to_string(i) + ": " + why);
      return;
    }
  }
}

}  // namespace torture
}  // namespace vyre_test
