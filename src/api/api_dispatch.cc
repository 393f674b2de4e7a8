// Dispatch and pending dispatches.
#include "api/api_call.h"
#include "api/register_handle.h"
#include "base/struct_size.h"
#include "driver/release_report.h"
#include "runtime/context/context.h"
#include "runtime/dispatch/pending.h"

extern "C" {

VYRE_API vyre_status vyre_dispatch(vyre_program program, const vyre_dispatch_desc* desc,
                                   vyre_timing* out_timing) {
  const char* what = "vyre_dispatch";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Program> p,
                          vyre::Programs().Lookup(program.bits, what));
    vyre_dispatch_desc d;
    VYRE_RETURN_IF_ERROR(vyre::ReadDescriptor(what, "vyre_dispatch_desc", desc, &d));
    if (out_timing != nullptr) {
      VYRE_RETURN_IF_ERROR(vyre::CheckOutStruct(what, "vyre_timing", out_timing));
    }
    // The synchronous path lives on the stack: no handle, no heap allocation.
    vyre::PendingDispatch pending(std::move(p), /*synchronous=*/true);
    pending.set_host_timing(out_timing != nullptr);
    VYRE_RETURN_IF_ERROR(pending.Enqueue(d, what));
    VYRE_RETURN_IF_ERROR(pending.Wait(VYRE_WAIT_FOREVER, what));
    if (out_timing != nullptr) {
      VYRE_ASSIGN_OR_RETURN(vyre_timing timing, pending.Timing(what));
      return vyre::WriteOutStruct(what, "vyre_timing", out_timing, timing);
    }
    return absl::OkStatus();
  });
}

VYRE_API vyre_status vyre_dispatch_async(vyre_program program, const vyre_dispatch_desc* desc,
                                         vyre_pending* out) {
  const char* what = "vyre_dispatch_async";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    out->bits = 0;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::Program> p,
                          vyre::Programs().Lookup(program.bits, what));
    vyre_dispatch_desc d;
    VYRE_RETURN_IF_ERROR(vyre::ReadDescriptor(what, "vyre_dispatch_desc", desc, &d));
    vyre::Context& ctx = p->context();
    std::shared_ptr<vyre::PendingDispatch> pending = p->recycled_dispatches().Take();
    if (pending) {
      pending->Attach(std::move(p));
    } else {
      pending = std::make_shared<vyre::PendingDispatch>(std::move(p), /*synchronous=*/false);
    }
    VYRE_RETURN_IF_ERROR(pending->Enqueue(d, what));
    VYRE_ASSIGN_OR_RETURN(out->bits,
                          vyre::Register(vyre::Pendings(), std::move(pending), &ctx, what));
    return absl::OkStatus();
  });
}

VYRE_API vyre_status vyre_pending_poll(vyre_pending pending) {
  const char* what = "vyre_pending_poll";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::PendingWork> p,
                          vyre::Pendings().Lookup(pending.bits, what));
    return p->Poll(what);
  });
}

VYRE_API vyre_status vyre_pending_wait(vyre_pending pending, uint64_t timeout_ns) {
  const char* what = "vyre_pending_wait";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::PendingWork> p,
                          vyre::Pendings().Lookup(pending.bits, what));
    return p->Wait(timeout_ns, what);
  });
}

VYRE_API vyre_status vyre_pending_timing(vyre_pending pending, vyre_timing* out) {
  const char* what = "vyre_pending_timing";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::PendingWork> p,
                          vyre::Pendings().Lookup(pending.bits, what));
    VYRE_RETURN_IF_ERROR(vyre::CheckOutStruct(what, "vyre_timing", out));
    VYRE_ASSIGN_OR_RETURN(vyre_timing timing, p->Timing(what));
    return vyre::WriteOutStruct(what, "vyre_timing", out, timing);
  });
}

VYRE_API vyre_status vyre_pending_release(vyre_pending pending) {
  const char* what = "vyre_pending_release";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    vyre::driver::ReleaseReport report;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::PendingWork> p,
                          vyre::Pendings().Remove(pending.bits, what));
    // Hold the context: recycling the pending may drop the last reference
    // to its program or graph, and through it to the context.
    std::shared_ptr<vyre::Context> ctx = p->context_ref();
    // A CPU e-graph rebuild's pending belongs to no context.
    if (ctx) {
      ctx->Disown(vyre::Pendings(), pending.bits);
      vyre::driver::ReleaseReport::NoteContext(ctx->cu());
    }
    // Work never waited on is waited for here, and its error returned: the
    // handle is gone, so nobody else could see it.
    absl::Status work_status = p->Abandon(what);
    vyre::PendingWork* work = p.get();
    work->Recycle(std::move(p));
    if (!work_status.ok()) return work_status;
    return report.Result(what, "the pending handle is released");
  });
}

}  // extern "C"
