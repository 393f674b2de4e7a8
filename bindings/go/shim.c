#include "shim.h"

#include "_cgo_export.h"

vyre_status govyre_call(int op, uint64_t handle, void* desc, size_t count, void* out,
                        void** const* where, const uint8_t* which, size_t patch_count,
                        void* p0, void* p1, void* p2, void* p3, void* p4, void* p5, void* p6,
                        void* p7, void* p8, void* p9, void* p10, void* p11, void* p12,
                        void* p13, void* p14, void* p15) {
  void* p[GOVYRE_MAX_GO_POINTERS] = {p0, p1, p2,  p3,  p4,  p5,  p6,  p7,
                                     p8, p9, p10, p11, p12, p13, p14, p15};
  for (size_t i = 0; i < patch_count; ++i) *where[i] = p[which[i] % GOVYRE_MAX_GO_POINTERS];
  vyre_status status = VYRE_STATUS_INTERNAL;
  switch (op) {
    case GOVYRE_DISPATCH:
      status = vyre_dispatch((vyre_program){handle}, (const vyre_dispatch_desc*)desc,
                             (vyre_timing*)out);
      break;
    case GOVYRE_DISPATCH_ASYNC:
      status = vyre_dispatch_async((vyre_program){handle}, (const vyre_dispatch_desc*)desc,
                                   (vyre_pending*)out);
      break;
    case GOVYRE_GRAPH_RECORD:
      status = vyre_graph_record((vyre_program){handle}, (const vyre_dispatch_desc*)desc,
                                 (vyre_graph*)out);
      break;
    case GOVYRE_GRAPH_REPLAY:
      status = vyre_graph_replay((vyre_graph){handle}, (const vyre_graph_replay_desc*)desc,
                                 (vyre_timing*)out);
      break;
    case GOVYRE_GRAPH_REPLAY_ASYNC:
      status = vyre_graph_replay_async((vyre_graph){handle},
                                       (const vyre_graph_replay_desc*)desc, (vyre_pending*)out);
      break;
    case GOVYRE_GRAPH_LAUNCH:
      status = vyre_graph_launch((vyre_graph){handle}, (const vyre_graph_replay_desc*)desc,
                                 (uint64_t)count, (vyre_pending*)out);
      break;
    case GOVYRE_CAPTURE_DISPATCH:
      status = vyre_capture_dispatch((vyre_program){handle}, (const vyre_dispatch_desc*)desc);
      break;
    case GOVYRE_UPLOAD_RANGES:
      status = vyre_buffer_upload_ranges((vyre_buffer){handle},
                                         (const vyre_upload_range*)desc, count);
      break;
    case GOVYRE_DOWNLOAD_RANGES:
      status = vyre_buffer_download_ranges((vyre_buffer){handle},
                                           (const vyre_download_range*)desc, count);
      break;
    case GOVYRE_EGRAPH_IMAGE_CREATE:
      status = vyre_egraph_image_create((const vyre_egraph_image_desc*)desc,
                                        (vyre_egraph_image*)out);
      break;
    case GOVYRE_EGRAPH_REBUILD:
      status = vyre_egraph_rebuild((vyre_egraph_image){handle},
                                   (const vyre_egraph_rebuild_desc*)desc,
                                   (vyre_egraph_rebuild_result*)out);
      break;
    case GOVYRE_EGRAPH_REBUILD_ASYNC:
      status = vyre_egraph_rebuild_async((vyre_egraph_image){handle},
                                         (const vyre_egraph_rebuild_desc*)desc,
                                         (vyre_pending*)out);
      break;
    case GOVYRE_EGRAPH_IMAGE_APPEND:
      status = vyre_egraph_image_append((vyre_egraph_image){handle},
                                        (const vyre_egraph_append_desc*)desc);
      break;
    case GOVYRE_SEQUENCE_CREATE:
      status = vyre_sequence_create((vyre_context){handle}, (const vyre_sequence_desc*)desc,
                                    (vyre_sequence*)out);
      break;
    default:
      break;
  }
  for (size_t i = 0; i < patch_count; ++i) *where[i] = NULL;
  return status;
}

void govyre_log_trampoline(void* user_data, vyre_log_level level, const char* message) {
  (void)user_data;
  govyreLog((int)level, (char*)message);
}

void* govyre_aligned_alloc(size_t bytes) {
  void* p = NULL;
  if (posix_memalign(&p, 4096, bytes) != 0) return NULL;
  return p;
}
