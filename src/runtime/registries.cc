#include "runtime/registries.h"

#include "runtime/transfer/buffer.h"
#include "runtime/context/context.h"
#include "runtime/transfer/host_memory.h"
#include "runtime/dispatch/pending.h"
#include "runtime/program/program.h"
#include "graph/graph.h"
#include "graph/sequence.h"
#include "egraph/egraph_image.h"

namespace vyre {

// Leaked on purpose: handles may be released from static destructors of the
// caller's program, after our own statics would have been destroyed.
HandleRegistry<Context>& Contexts() {
  static auto* registry = new HandleRegistry<Context>(HandleType::kContext);
  return *registry;
}
HandleRegistry<Buffer>& Buffers() {
  static auto* registry = new HandleRegistry<Buffer>(HandleType::kBuffer);
  return *registry;
}
HandleRegistry<Program>& Programs() {
  static auto* registry = new HandleRegistry<Program>(HandleType::kProgram);
  return *registry;
}
HandleRegistry<PendingWork>& Pendings() {
  static auto* registry = new HandleRegistry<PendingWork>(HandleType::kPending);
  return *registry;
}
HandleRegistry<Graph>& Graphs() {
  static auto* registry = new HandleRegistry<Graph>(HandleType::kGraph);
  return *registry;
}
HandleRegistry<EgraphImage>& EgraphImages() {
  static auto* registry = new HandleRegistry<EgraphImage>(HandleType::kEgraphImage);
  return *registry;
}
HandleRegistry<Sequence>& Sequences() {
  static auto* registry = new HandleRegistry<Sequence>(HandleType::kSequence);
  return *registry;
}

void RemoveOwnedHandle(HandleType type, uint64_t bits) {
  const char* what = "vyre_context_destroy";
  // The removed object is destroyed here, outside the registry lock, unless an
  // in-flight call still holds it; then it goes when that call returns.
  switch (type) {
    case HandleType::kPending: Pendings().Remove(bits, what).IgnoreError(); break;
    case HandleType::kProgram: Programs().Remove(bits, what).IgnoreError(); break;
    case HandleType::kBuffer: {
      auto removed = Buffers().Remove(bits, what);
      if (removed.ok()) (*removed)->MarkFreed();
      break;
    }
    case HandleType::kGraph: Graphs().Remove(bits, what).IgnoreError(); break;
    case HandleType::kSequence: Sequences().Remove(bits, what).IgnoreError(); break;
    case HandleType::kEgraphImage: EgraphImages().Remove(bits, what).IgnoreError(); break;
    case HandleType::kHostMemory: HostMemory().ReleaseOwned(static_cast<uintptr_t>(bits)); break;
    case HandleType::kContext: Contexts().Remove(bits, what).IgnoreError(); break;
  }
}

}  // namespace vyre
