// The CPU model of resident buffers that graphs and sequences share: live
// buffers and ranges, the test kernels on the shadows, and sequences run
// step by step.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "torture.h"

namespace vyre_test {
namespace torture {

bool Overlap(const Range& a, const Range& b) {
  return a.buffer == b.buffer && a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}

BufferState* Torture::LiveBuffer(uint64_t bits) {
  for (BufferState& b : pop_.buffers) {
    if (b.handle.bits == bits) return &b;
  }
  return nullptr;
}

bool Torture::AllLive(const std::vector<Range>& ranges) {
  for (const Range& r : ranges) {
    if (LiveBuffer(r.buffer) == nullptr) return false;
  }
  return true;
}

bool Torture::RandomRange(uint64_t context, uint64_t bytes, const std::vector<Range>& avoid,
                          Range* out) {
  std::vector<size_t> fits;
  for (size_t i = 0; i < pop_.buffers.size(); ++i) {
    if (pop_.buffers[i].context == context && pop_.buffers[i].bytes >= bytes) fits.push_back(i);
  }
  for (int attempt = 0; attempt < 4 && !fits.empty(); ++attempt) {
    const BufferState& b = pop_.buffers[rng_.Pick(fits)];
    Range r{b.handle.bits, 4 * rng_.Below((b.bytes - bytes) / 4 + 1), bytes};
    bool clear = true;
    for (const Range& a : avoid) clear = clear && !Overlap(a, r);
    if (clear) {
      *out = r;
      return true;
    }
  }
  return false;
}

void Torture::ModelInc(const Range& data, uint32_t n, uint32_t times) {
  BufferState& b = *LiveBuffer(data.buffer);
  for (uint64_t e = 0; e < n; ++e) {
    uint32_t v;
    std::memcpy(&v, &b.shadow[data.offset + 4 * e], 4);
    v += times;
    std::memcpy(&b.shadow[data.offset + 4 * e], &v, 4);
  }
}

void Torture::ModelAdd(const Range& a, const Range& b, const Range& out, uint32_t n) {
  const BufferState& ba = *LiveBuffer(a.buffer);
  const BufferState& bb = *LiveBuffer(b.buffer);
  std::vector<uint8_t> av(ba.shadow.begin() + a.offset, ba.shadow.begin() + a.offset + a.bytes);
  std::vector<uint8_t> ak(ba.known.begin() + a.offset, ba.known.begin() + a.offset + a.bytes);
  std::vector<uint8_t> bv(bb.shadow.begin() + b.offset, bb.shadow.begin() + b.offset + b.bytes);
  std::vector<uint8_t> bk(bb.known.begin() + b.offset, bb.known.begin() + b.offset + b.bytes);
  BufferState& bo = *LiveBuffer(out.buffer);
  // OUTPUT: zeroed, then n elements written.
  std::fill(bo.shadow.begin() + out.offset, bo.shadow.begin() + out.offset + out.bytes, 0);
  std::fill(bo.known.begin() + out.offset, bo.known.begin() + out.offset + out.bytes, 1);
  for (uint64_t e = 0; e < n; ++e) {
    uint32_t x, y;
    std::memcpy(&x, &av[4 * e], 4);
    std::memcpy(&y, &bv[4 * e], 4);
    uint32_t sum = x + y;
    std::memcpy(&bo.shadow[out.offset + 4 * e], &sum, 4);
    bool k = std::all_of(&ak[4 * e], &ak[4 * e] + 4, [](uint8_t v) { return v != 0; }) &&
             std::all_of(&bk[4 * e], &bk[4 * e] + 4, [](uint8_t v) { return v != 0; });
    std::fill(&bo.known[out.offset + 4 * e], &bo.known[out.offset + 4 * e] + 4, k ? 1 : 0);
  }
}

std::vector<Range> SequenceRanges(const SeqModel& m) {
  std::vector<Range> ranges;
  for (const SeqStepModel& s : m.steps) {
    if (s.kind == VYRE_STEP_DISPATCH) {
      ranges.insert(ranges.end(), s.bindings.begin(), s.bindings.end());
    } else {
      ranges.push_back(s.dst);
      if (s.kind == VYRE_STEP_COPY) ranges.push_back(s.src);
    }
  }
  return ranges;
}

void Torture::ModelSequence(const SeqModel& m, Downloads* downloads) {
  for (uint32_t index : m.order) {
    const SeqStepModel& s = m.steps[index];
    switch (s.kind) {
      case VYRE_STEP_FILL: {
        BufferState& b = *LiveBuffer(s.dst.buffer);
        std::fill_n(b.shadow.begin() + s.dst.offset, s.dst.bytes, s.fill);
        std::fill_n(b.known.begin() + s.dst.offset, s.dst.bytes, 1);
        break;
      }
      case VYRE_STEP_COPY: {
        const BufferState& src = *LiveBuffer(s.src.buffer);
        std::vector<uint8_t> v(src.shadow.begin() + s.src.offset,
                               src.shadow.begin() + s.src.offset + s.src.bytes);
        std::vector<uint8_t> k(src.known.begin() + s.src.offset,
                               src.known.begin() + s.src.offset + s.src.bytes);
        BufferState& dst = *LiveBuffer(s.dst.buffer);
        std::copy(v.begin(), v.end(), dst.shadow.begin() + s.dst.offset);
        std::copy(k.begin(), k.end(), dst.known.begin() + s.dst.offset);
        break;
      }
      case VYRE_STEP_UPLOAD: {
        BufferState& b = *LiveBuffer(s.dst.buffer);
        std::copy(s.host->begin(), s.host->end(), b.shadow.begin() + s.dst.offset);
        std::fill_n(b.known.begin() + s.dst.offset, s.dst.bytes, 1);
        break;
      }
      case VYRE_STEP_DOWNLOAD: {
        const BufferState& b = *LiveBuffer(s.dst.buffer);
        (*downloads)[index] = {
            std::vector<uint8_t>(b.shadow.begin() + s.dst.offset,
                                 b.shadow.begin() + s.dst.offset + s.dst.bytes),
            std::vector<uint8_t>(b.known.begin() + s.dst.offset,
                                 b.known.begin() + s.dst.offset + s.dst.bytes)};
        break;
      }
      case VYRE_STEP_DISPATCH:
        if (s.kernel == KernelKind::kInc) {
          ModelInc(s.bindings[0], s.n, s.iterations);
        } else {
          ModelAdd(s.bindings[0], s.bindings[1], s.bindings[2], s.n);
        }
        break;
      default: break;
    }
  }
}

std::vector<HostBinding> Torture::SequenceOutputs(const SeqModel& m, const Downloads& downloads) {
  std::vector<HostBinding> out;
  for (const auto& [index, bytes] : downloads) {
    HostBinding h;
    h.memory = m.steps[index].host;
    h.before = *h.memory;
    h.expected = bytes.first;
    h.expected_known = bytes.second;
    h.written = true;
    out.push_back(std::move(h));
  }
  return out;
}

void RefreshSequenceHost(const SeqModel& m, Rng* rng) {
  for (const SeqStepModel& s : m.steps) {
    if (s.kind == VYRE_STEP_UPLOAD) {
      for (size_t i = 0; i < s.host->size(); ++i) (*s.host)[i] = uint8_t(rng->Bits());
    } else if (s.kind == VYRE_STEP_DOWNLOAD) {
      std::fill(s.host->begin(), s.host->end(), kPoisonByte);
    }
  }
}

}  // namespace torture
}  // namespace vyre_test
