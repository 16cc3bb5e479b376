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
  const v1::DataSpec& data = spec.data();
  if (!data.tokenizer().empty() || !data.text_column().empty()) {
    google::protobuf::Struct text;
    auto& fields = *text.mutable_fields();
    fields["seq_len"].set_number_value(data.seq_len());
    if (!data.text_column().empty()) fields["text_column"].set_string_value(data.text_column());
    if (!data.tokenizer().empty()) {
      fields["tokenizer"].set_string_value(data.tokenizer());
      for (const v1::ShippedFile& f : spec.shipped_files()) {
        if (f.field() == "data.tokenizer") fields["tokenizer_sha256"].set_string_value(f.sha256());
      }
    }
    meta["trainctl.text"] = CompactJson(text);
  }
  return meta;
}

}  // namespace trainctl
