// The torture test's bookkeeping when objects die: their handles join the
// dead ones (to be used again, and found stale), and what they owned follows.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "torture.h"

namespace vyre_test {
namespace torture {

void RememberDead(std::vector<uint64_t>* dead, uint64_t bits, Rng* rng) {
  if (dead->size() < kMaxDead) {
    dead->push_back(bits);
  } else {
    (*dead)[rng->Below(dead->size())] = bits;
  }
}

const char* ChoiceName(HandleChoice c) {
  switch (c) {
    case HandleChoice::kValid: return "valid";
    case HandleChoice::kStale: return "stale";
    case HandleChoice::kForged: return "forged";
    case HandleChoice::kWrongType: return "wrong-type";
    case HandleChoice::kZero: return "zero";
  }
  return "?";
}

void Torture::ForgetBuffer(size_t index) {
  RememberDead(&pop_.dead_buffers, pop_.buffers[index].handle.bits, &rng_);
  pop_.buffers.erase(pop_.buffers.begin() + index);
}

void Torture::ForgetPending(size_t index) {
  PendingDone(pop_.pendings[index].handle.bits);
  RememberDead(&pop_.dead_pendings, pop_.pendings[index].handle.bits, &rng_);
  pop_.pendings.erase(pop_.pendings.begin() + index);
}

void Torture::ForgetGraph(size_t index) {
  RememberDead(&pop_.dead_graphs, pop_.graphs[index].handle.bits, &rng_);
  pop_.graphs.erase(pop_.graphs.begin() + index);
}

void Torture::ForgetSequence(size_t index) {
  RememberDead(&pop_.dead_sequences, pop_.sequences[index].handle.bits, &rng_);
  pop_.sequences.erase(pop_.sequences.begin() + index);
}

void Torture::PendingDone(uint64_t bits) {
  for (GraphState& g : pop_.graphs) {
    if (g.pending == bits) g.pending = 0;
    if (g.sequence && g.sequence->busy_pending == bits) g.sequence->busy_pending = 0;
  }
  for (SequenceState& q : pop_.sequences) {
    if (q.model->busy_pending == bits) q.model->busy_pending = 0;
  }
}

// Everything a destroyed context owned becomes stale.
void Torture::ForgetContext(uint64_t context) {
  pop_.contexts.erase(std::find(pop_.contexts.begin(), pop_.contexts.end(), context));
  RememberDead(&pop_.dead_contexts, context, &rng_);
  for (size_t i = pop_.buffers.size(); i-- > 0;) {
    if (pop_.buffers[i].context == context) ForgetBuffer(i);
  }
  for (size_t i = pop_.programs.size(); i-- > 0;) {
    if (pop_.programs[i].context == context) {
      RememberDead(&pop_.dead_programs, pop_.programs[i].handle.bits, &rng_);
      pop_.programs.erase(pop_.programs.begin() + i);
    }
  }
  for (size_t i = pop_.pendings.size(); i-- > 0;) {
    if (pop_.pendings[i].context == context) {
      // Destroying the context released it without a read-back.
      if (!pop_.pendings[i].waited) {
        CheckHostOutputs(pop_.pendings[i], false, "vyre_context_destroy");
      }
      ForgetPending(i);
    }
  }
  for (size_t i = pop_.graphs.size(); i-- > 0;) {
    if (pop_.graphs[i].context == context) ForgetGraph(i);
  }
  for (size_t i = pop_.sequences.size(); i-- > 0;) {
    if (pop_.sequences[i].context == context) ForgetSequence(i);
  }
}

}  // namespace torture
}  // namespace vyre_test
