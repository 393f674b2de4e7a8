// E-graph images, passes and rebuilds.
#include "api/api_call.h"
#include "api/register_handle.h"
#include "base/raw_enum.h"
#include "base/struct_size.h"
#include "driver/release_report.h"
#include "egraph/egraph_image.h"
#include "egraph/egraph_rebuild.h"

namespace vyre {
namespace {

absl::StatusOr<std::shared_ptr<EgraphImage>> LookupImage(vyre_egraph_image image,
                                                         const char* what) {
  return EgraphImages().Lookup(image.bits, what);
}

absl::Status ReadRebuildDesc(const char* what, const vyre_egraph_rebuild_desc* desc,
                             vyre_egraph_rebuild_desc* out) {
  if (desc == nullptr) {
    *out = vyre_egraph_rebuild_desc{};
    out->struct_size = sizeof(*out);
    return absl::OkStatus();
  }
  return ReadDescriptor(what, "vyre_egraph_rebuild_desc", desc, out);
}

}  // namespace
}  // namespace vyre

extern "C" {

VYRE_API vyre_status vyre_egraph_image_create(const vyre_egraph_image_desc* desc,
                                              vyre_egraph_image* out) {
  const char* what = "vyre_egraph_image_create";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    out->bits = 0;
    vyre_egraph_image_desc d;
    VYRE_RETURN_IF_ERROR(vyre::ReadDescriptor(what, "vyre_egraph_image_desc", desc, &d,
                                              offsetof(vyre_egraph_image_desc, row_capacity)));
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::EgraphImage> image,
                          vyre::EgraphImage::Create(d, what));
    vyre::Context* ctx = image->context();
    VYRE_ASSIGN_OR_RETURN(out->bits,
                          vyre::Register(vyre::EgraphImages(), std::move(image), ctx, what));
    return absl::OkStatus();
  });
}

VYRE_API vyre_status vyre_egraph_image_destroy(vyre_egraph_image image) {
  const char* what = "vyre_egraph_image_destroy";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    vyre::driver::ReleaseReport report;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::EgraphImage> im,
                          vyre::EgraphImages().Remove(image.bits, what));
    if (im->context() != nullptr) {
      vyre::driver::ReleaseReport::NoteContext(im->context()->cu());
      im->context()->Disown(vyre::EgraphImages(), image.bits);
    }
    im.reset();
    return report.Result(what, "the e-graph image is destroyed");
  });
}

VYRE_API vyre_status vyre_egraph_image_read(vyre_egraph_image image, vyre_egraph_column column,
                                            uint64_t first, uint64_t count, uint32_t* dst) {
  const char* what = "vyre_egraph_image_read";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::EgraphImage> im, vyre::LookupImage(image, what));
    return im->Read(vyre::RawEnum(column), first, count, dst, what);
  });
}

VYRE_API vyre_status vyre_egraph_image_write(vyre_egraph_image image, vyre_egraph_column column,
                                             uint64_t first, uint64_t count,
                                             const uint32_t* src) {
  const char* what = "vyre_egraph_image_write";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::EgraphImage> im, vyre::LookupImage(image, what));
    return im->Write(vyre::RawEnum(column), first, count, src, what);
  });
}

VYRE_API vyre_status vyre_egraph_image_info_get(vyre_egraph_image image,
                                                vyre_egraph_image_info* out) {
  const char* what = "vyre_egraph_image_info_get";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::EgraphImage> im, vyre::LookupImage(image, what));
    VYRE_RETURN_IF_ERROR(vyre::CheckOutStruct(what, "vyre_egraph_image_info", out, vyre::kEgraphInfoV1));
    VYRE_ASSIGN_OR_RETURN(vyre_egraph_image_info info, im->Info(what));
    return vyre::WriteOutStruct(what, "vyre_egraph_image_info", out, info, vyre::kEgraphInfoV1);
  });
}

VYRE_API vyre_status vyre_egraph_image_append(vyre_egraph_image image,
                                              const vyre_egraph_append_desc* desc) {
  const char* what = "vyre_egraph_image_append";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::EgraphImage> im, vyre::LookupImage(image, what));
    vyre_egraph_append_desc d;
    VYRE_RETURN_IF_ERROR(vyre::ReadDescriptor(what, "vyre_egraph_append_desc", desc, &d));
    return im->Append(d, what);
  });
}

VYRE_API vyre_status vyre_egraph_changed_read(vyre_egraph_image image, uint32_t* pairs,
                                              uint64_t pair_capacity, uint64_t* out_pair_count) {
  const char* what = "vyre_egraph_changed_read";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out_pair_count, "out_pair_count"));
    *out_pair_count = 0;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::EgraphImage> im, vyre::LookupImage(image, what));
    return im->ReadChanged(pairs, pair_capacity, out_pair_count, what);
  });
}

VYRE_API vyre_status vyre_egraph_pass(vyre_egraph_image image, uint32_t* pairs,
                                      uint64_t pair_capacity, uint64_t* out_pair_count) {
  const char* what = "vyre_egraph_pass";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out_pair_count, "out_pair_count"));
    *out_pair_count = 0;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::EgraphImage> im, vyre::LookupImage(image, what));
    return im->Pass(pairs, pair_capacity, out_pair_count, what);
  });
}

VYRE_API vyre_status vyre_egraph_rebuild(vyre_egraph_image image,
                                         const vyre_egraph_rebuild_desc* desc,
                                         vyre_egraph_rebuild_result* out) {
  const char* what = "vyre_egraph_rebuild";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::EgraphImage> im, vyre::LookupImage(image, what));
    vyre_egraph_rebuild_desc d;
    VYRE_RETURN_IF_ERROR(vyre::ReadRebuildDesc(what, desc, &d));
    if (out != nullptr) {
      VYRE_RETURN_IF_ERROR(vyre::CheckOutStruct(what, "vyre_egraph_rebuild_result", out, vyre::kRebuildResultV1));
    }
    // Checked before anything merges: a refused call changes nothing.
    if (d.result_out != nullptr) {
      VYRE_RETURN_IF_ERROR(
          vyre::CheckOutStruct(what, "vyre_egraph_rebuild_result", d.result_out,
                               vyre::kRebuildResultV1));
    }
    vyre::EgraphRebuild rebuild(std::move(im), /*synchronous=*/true);
    VYRE_RETURN_IF_ERROR(rebuild.Start(d, what));
    VYRE_RETURN_IF_ERROR(rebuild.Wait(VYRE_WAIT_FOREVER, what));
    if (out == nullptr) return absl::OkStatus();
    return vyre::WriteOutStruct(what, "vyre_egraph_rebuild_result", out, rebuild.result(),
                                vyre::kRebuildResultV1);
  });
}

VYRE_API vyre_status vyre_egraph_rebuild_async(vyre_egraph_image image,
                                               const vyre_egraph_rebuild_desc* desc,
                                               vyre_pending* out) {
  const char* what = "vyre_egraph_rebuild_async";
  return vyre::ApiCall(what, [&]() -> absl::Status {
    VYRE_RETURN_IF_ERROR(vyre::RequireOut(what, out, "out"));
    out->bits = 0;
    VYRE_ASSIGN_OR_RETURN(std::shared_ptr<vyre::EgraphImage> im, vyre::LookupImage(image, what));
    vyre_egraph_rebuild_desc d;
    VYRE_RETURN_IF_ERROR(vyre::ReadRebuildDesc(what, desc, &d));
    if (d.result_out != nullptr) {
      VYRE_RETURN_IF_ERROR(
          vyre::CheckOutStruct(what, "vyre_egraph_rebuild_result", d.result_out,
                               vyre::kRebuildResultV1));
    }
    vyre::Context* ctx = im->context();
    auto rebuild = std::make_shared<vyre::EgraphRebuild>(std::move(im), /*synchronous=*/false);
    VYRE_RETURN_IF_ERROR(rebuild->Start(d, what));
    VYRE_ASSIGN_OR_RETURN(out->bits,
                          vyre::Register(vyre::Pendings(), std::move(rebuild), ctx, what));
    return absl::OkStatus();
  });
}

}  // extern "C"
