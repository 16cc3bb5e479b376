#include "common/model_metadata.h"

#include <google/protobuf/struct.pb.h>

#include "absl/strings/str_cat.h"
#include "common/proto_json.h"

namespace trainctl {
namespace {

std::string CompactJson(const google::protobuf::Message& message) {
  std::string json;
  return ProtoToJson(message, /*pretty=*/false, &json) ? json : "{}";
}

}  // namespace

std::map<std::string, std::string> ModelFileMetadata(
    const v1::JobSpec& spec, const std::string& job_id, int64_t step, int epoch,
    const std::map<std::string, double>& eval, const v1::ImageTransformsSpec& transforms) {
  google::protobuf::Struct eval_json;
  for (const auto& [key, value] : eval) {
    (*eval_json.mutable_fields())[key].set_number_value(value);
  }
  std::map<std::string, std::string> meta = {
      {"format", "pt"},  // what Hugging Face's loaders look for
      {"trainctl.job_id", job_id},
      {"trainctl.job_name", spec.name()},
      {"trainctl.step", absl::StrCat(step)},
      {"trainctl.epoch", absl::StrCat(epoch)},
      {"trainctl.task", spec.task()},
      {"trainctl.model", CompactJson(spec.model())},
      {"trainctl.eval", CompactJson(eval_json)},
  };
  if (spec.data().has_transforms()) meta["trainctl.transforms"] = CompactJson(transforms);
  return meta;
}

}  // namespace trainctl
