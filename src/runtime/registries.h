// The process-wide handle tables, one per object type.
#ifndef VYRE_RUNTIME_REGISTRIES_H_
#define VYRE_RUNTIME_REGISTRIES_H_

#include "base/handle_registry.h"

namespace vyre {

class Context;
class Buffer;
class Program;
class PendingWork;
class Graph;
class Sequence;
class EgraphImage;

HandleRegistry<Context>& Contexts();
HandleRegistry<Buffer>& Buffers();
HandleRegistry<Program>& Programs();
HandleRegistry<PendingWork>& Pendings();
HandleRegistry<Graph>& Graphs();
HandleRegistry<Sequence>& Sequences();
HandleRegistry<EgraphImage>& EgraphImages();

// Removes a handle of any type from its table (used when a context closes).
void RemoveOwnedHandle(HandleType type, uint64_t bits);

}  // namespace vyre

#endif  // VYRE_RUNTIME_REGISTRIES_H_
