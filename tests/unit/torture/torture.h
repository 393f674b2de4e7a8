// The torture run: one Torture object draws random operations over its model
// of the API's objects, makes each call and checks it. The operations are
// defined in ops_*.cc, the checks in checks.cc, the loop in run.cc.
#ifndef VYRE_TESTS_UNIT_TORTURE_TORTURE_H_
#define VYRE_TESTS_UNIT_TORTURE_TORTURE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model.h"
#include "vyre_cuda.h"
#include "vyre_test_util.h"

namespace vyre_test {
namespace torture {

enum class Op {
  kContextCreate,
  kContextDestroy,
  kContextQuery,
  kBufferAlloc,
  kBufferFree,
  kBufferInfo,
  kUpload,
  kDownload,
  kUploadRanges,
  kDownloadRanges,
  kProgramCreate,
  kProgramDestroy,
  kDispatch,
  kDispatchAsync,
  kPendingPoll,
  kPendingWait,
  kPendingTiming,
  kPendingRelease,
  kLastErrorProbe,
  kGraphRecord,
  kGraphReplay,
  kGraphReplayAsync,
  kGraphDestroy,
  kGraphQuery,
  kSequenceCreate,
  kSequenceRun,
  kSequenceRecord,
  kSequenceDestroy,
  kBufferCopy,
  kCount
};

// The state of one operation while it is built, made and modelled
// (ops_dispatch.cc, ops_graph_replay.cc, ops_sequences.cc).
struct DispatchCall;
struct ReplayCall;
struct SequenceBuild;

class Torture {
 public:
  explicit Torture(uint64_t seed) : rng_(seed), seed_(seed) {}

  void Run(int operations);
  void DestroyEverything();
  bool failed() const { return failures_ > 0; }
  void PrintSummary() const;

 private:
  // One row per Op, in its order (run.cc).
  struct OpEntry {
    const char* name;
    int weight;  // relative frequency
    void (Torture::*run)();
  };
  static const OpEntry kOps[];
  static const char* OpName(Op op);

  // --- one function per operation ---
  void ContextCreate();
  void ContextDestroy();
  void ContextQuery();
  void BufferAlloc();
  void BufferFree();
  void BufferInfo();
  void Upload();
  void Download();
  void UploadRanges();
  void DownloadRanges();
  void BufferCopy();
  void ProgramCreate();
  void ProgramDestroy();
  void DispatchOp(bool async);
  void Dispatch() { DispatchOp(false); }
  void DispatchAsync() { DispatchOp(true); }
  void PendingPoll();
  void PendingWait();
  void PendingTiming();
  void PendingRelease();
  void LastErrorProbe();
  void GraphRecord();
  void GraphReplay(bool async);
  void GraphReplaySync() { GraphReplay(false); }
  void GraphReplayAsync() { GraphReplay(true); }
  void GraphDestroy();
  void GraphQuery();
  void SequenceCreate();
  void SequenceRun();
  void SequenceRecord();
  void SequenceDestroy();

  // --- the parts of the larger operations ---
  // A context for the next operation when none is alive; false when that fails.
  bool EnsureContext();
  void CheckTelemetry(vyre_context context, const vyre_telemetry& t);
  void BindArgument(DispatchCall* c, size_t i);
  void BindResident(DispatchCall* c, size_t i, uint64_t bytes, uint32_t esize);
  void BindAnyRange(DispatchCall* c, size_t i);
  void BindHost(DispatchCall* c, size_t i, uint64_t bytes);
  bool MakeDispatch(DispatchCall* c, vyre_pending* out);
  void ForgetResidentOutputs(const DispatchCall& c);
  void ModelDispatch(DispatchCall* c, uint64_t n_eff, uint32_t iterations);
  void DispatchInput(const DispatchCall& c, size_t i, std::vector<uint8_t>* bytes,
                     std::vector<uint8_t>* known);
  void RecordOtherProgram(vyre_program program, HandleChoice choice);
  void BindRecordedRanges(GraphState* g, std::vector<vyre_dispatch_binding>* bindings);
  void BindRecordedHost(const GraphState& g, std::vector<vyre_dispatch_binding>* bindings,
                        PendingState* host);
  vyre_status MalformRecord(bool host, DispatchSpec* spec, vyre_dispatch_desc* desc,
                            bool* null_out, bool* null_desc);
  void CheckGraphInfo(const GraphState& g, const vyre_graph_info& i);
  void QueryGraphNodes(vyre_graph graph, uint64_t nodes);
  void UpdateKernelNode(vyre_graph graph, uint64_t node, uint64_t nodes,
                        vyre_graph_node_kind kind);
  vyre_status InvokeReplay(ReplayCall* r, const vyre_graph_replay_desc* desc);
  void ReplaySequenceGraph(ReplayCall* r, GraphState* g);
  void ReplayDispatchGraph(ReplayCall* r, GraphState* g);
  void PrepareReplay(ReplayCall* r, const GraphState& g);
  void RebindReplay(ReplayCall* r, const GraphState& g);
  void ReplayBindings(ReplayCall* r, const GraphState& g);
  void MalformReplay(ReplayCall* r, const GraphState& g);
  void MalformReplayShape(ReplayCall* r, const GraphState& g,
                          const std::vector<uint64_t>& live_of_context, uint64_t pick);
  void MalformReplayArguments(ReplayCall* r, const GraphState& g,
                              const std::vector<uint64_t>& live_of_context, uint64_t pick);
  void ModelReplay(ReplayCall* r, GraphState* g);
  void SequenceCreateRefused(vyre_context context, HandleChoice choice);
  Range RandomByteRange(const std::vector<size_t>& buffers, uint64_t max_bytes);
  void AddSequenceStep(SequenceBuild* build);
  bool RandomSequenceStep(SequenceBuild* build, SeqStepModel* m, vyre_sequence_step* st);
  bool RandomDispatchStep(SequenceBuild* build, SeqStepModel* m, vyre_sequence_step* st);
  vyre_status MalformSequence(SequenceBuild* build, vyre_sequence_desc* desc, bool* null_out);
  void MalformSequenceDispatch(const SequenceBuild& build, size_t victim);

  // --- helpers ---
  // Checks the rules every call obeys; returns the status.
  vyre_status Check(vyre_status status, const char* call);
  void Fail(const std::string& what);
  void ExpectStatus(vyre_status actual, vyre_status expected, const char* call);
  void ExpectNotOk(vyre_status actual, HandleChoice choice, const char* call);
  // The status of a call that was given a bad handle (choice != kValid) and
  // otherwise valid arguments: STALE_HANDLE for a stale one, INVALID_HANDLE
  // for 0 or another type's, either for forged bits (flipping a live
  // handle's bits may name a long-dead object).
  void ExpectHandleError(vyre_status actual, HandleChoice choice, const char* call);
  // Checks a ranged upload/download's status against what its arguments
  // call for; true when it succeeded and its data should be checked.
  bool RangesCallAsExpected(vyre_status actual, HandleChoice choice, bool null_pointer,
                            bool all_in_range, const char* call);

  // Picks a handle of a kind: `live` are the valid ones, `dead` stale ones.
  uint64_t PickHandle(const std::vector<uint64_t>& live, const std::vector<uint64_t>& dead,
                      HandleChoice* choice, double valid_bias = 0.8);
  int PickIndex(size_t size) { return size == 0 ? -1 : int(rng_.Below(size)); }
  template <typename Object>
  uint64_t PickFrom(const std::vector<Object>& objects, const std::vector<uint64_t>& dead,
                    double valid_bias, int* index, HandleChoice* choice);
  uint64_t PickBufferHandle(int* index, HandleChoice* choice);
  uint64_t PickProgramHandle(int* index, HandleChoice* choice);
  uint64_t PickPendingHandle(int* index, HandleChoice* choice);
  uint64_t PickContextHandle(HandleChoice* choice);
  uint64_t PickGraphHandle(int* index, HandleChoice* choice);
  uint64_t PickSequenceHandle(int* index, HandleChoice* choice);

  uint64_t RandomOffset(uint64_t size);
  uint64_t RandomLength(uint64_t size, uint64_t offset);
  std::vector<uint8_t> RandomBytes(size_t n);

  void ForgetContext(uint64_t context);
  void ForgetBuffer(size_t index);
  void ForgetPending(size_t index);
  void ForgetGraph(size_t index);
  void ForgetSequence(size_t index);
  void CheckHostOutputs(const PendingState& pending, bool read_back, const char* call);
  // A pending replay was waited on or released: its graph and sequence are
  // free for other replays and runs.
  void PendingDone(uint64_t bits);

  // --- the model of resident buffers, for graphs and sequences ---
  BufferState* LiveBuffer(uint64_t bits);
  bool AllLive(const std::vector<Range>& ranges);
  // A random element-aligned range of `bytes` in a live buffer of `context`
  // (avoiding `avoid` when given); false when none fits.
  bool RandomRange(uint64_t context, uint64_t bytes, const std::vector<Range>& avoid, Range* out);
  void ModelInc(const Range& data, uint32_t n, uint32_t times);
  void ModelAdd(const Range& a, const Range& b, const Range& out, uint32_t n);
  // Runs a sequence's steps on the shadows; `downloads` receives what each
  // DOWNLOAD step's host memory holds afterwards (bytes and known flags).
  void ModelSequence(const SeqModel& model, Downloads* downloads);
  // Host memory of a sequence's DOWNLOAD steps as HostBindings to check.
  std::vector<HostBinding> SequenceOutputs(const SeqModel& model, const Downloads& downloads);
  uint64_t checked_graph_replays_ = 0;
  uint64_t checked_sequence_runs_ = 0;

  Rng rng_;
  uint64_t seed_;
  int op_index_ = 0;
  Op current_op_ = Op::kContextCreate;
  int failures_ = 0;
  Population pop_;
  std::map<std::string, std::map<std::string, int>> histogram_;
  uint64_t checked_elements_ = 0;
  uint64_t checked_dispatches_ = 0;
};

}  // namespace torture
}  // namespace vyre_test

#endif  // VYRE_TESTS_UNIT_TORTURE_TORTURE_H_
