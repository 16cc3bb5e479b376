#include "coordinator/resume_check.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"

namespace trainctl::coordinator {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// A field's value as a person writes it in a spec (lists joined).
std::string FieldText(const Message& message, const FieldDescriptor* field) {
  const auto* reflection = message.GetReflection();
  std::string out;
  if (field->is_repeated()) {
    std::vector<std::string> items;
    for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
      std::string item;
      google::protobuf::TextFormat::PrintFieldValueToString(message, field, i,
                                                            &item);
      items.push_back(item);
    }
    return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
  }
  google::protobuf::TextFormat::PrintFieldValueToString(message, field, -1,
                                                        &out);
  return out;
}

// The first of `fields` (all of `a`'s when empty, less `skip`) whose values
// differ, as "section.field: job-1 had X, this spec has Y".
std::string FirstDifference(const Message& a, const Message& b,
                            const std::string& section,
                            const std::vector<std::string>& fields,
                            const std::vector<std::string>& skip,
                            const std::string& from_job) {
  const auto* descriptor = a.GetDescriptor();
  std::vector<const FieldDescriptor*> compared;
  if (fields.empty()) {
    for (int i = 0; i < descriptor->field_count(); ++i) {
      const FieldDescriptor* f = descriptor->field(i);
      if (std::find(skip.begin(), skip.end(), f->name()) == skip.end()) {
        compared.push_back(f);
      }
    }
  } else {
    for (const std::string& name : fields) {
      compared.push_back(descriptor->FindFieldByName(name));
    }
  }
  for (const FieldDescriptor* f : compared) {
    const std::string was = FieldText(a, f);
    const std::string now = FieldText(b, f);
    if (was != now) {
      return absl::StrCat(section, ".", f->name(), ": ", from_job, " had ",
                          was, ", this spec has ", now);
    }
  }
  return "";
}

}  // namespace

absl::Status CheckResumeCompatible(const v1::JobSpec& from,
                                   const std::string& from_job,
                                   const v1::JobSpec& to) {
  std::string difference;
  if (from.task() != to.task()) {
    difference = absl::StrCat("task: ", from_job, " had '", from.task(),
                              "', this spec has '", to.task(), "'");
  }
  if (difference.empty()) {
    difference = FirstDifference(from.model(), to.model(), "model", {},
                                 {"dropout"}, from_job);
  }
  if (difference.empty()) {
    difference = FirstDifference(from.optimizer(), to.optimizer(),
                                 "optimizer", {"type"}, {}, from_job);
  }
  if (difference.empty()) {
    const auto global = [](const v1::TrainingSpec& t) {
      return t.batch_size() * std::max<int64_t>(t.grad_accum_steps(), 1);
    };
    if (global(from.training()) != global(to.training())) {
      difference = absl::StrCat(
          "training.batch_size x grad_accum_steps: ", from_job, " stepped ",
          global(from.training()), " samples at a time, this spec steps ",
          global(to.training()));
    }
  }
  if (difference.empty()) {
    // The training set and how it is cut into samples; where evaluation
    // data comes from may change.
    difference = FirstDifference(
        from.data(), to.data(), "data",
        {"format", "train_images", "train_labels", "train_path",
         "train_inputs", "input_name", "train_limit", "eval_fraction",
         "label_column", "header", "delimiter", "token_dtype", "seq_len"},
        {}, from_job);
  }
  if (difference.empty()) {
    // The size of the images the model sees: after resizing, then cropping.
    // Augmentation and normalisation may change.
    difference = FirstDifference(from.data().transforms(),
                                 to.data().transforms(), "data.transforms",
                                 {"resize"}, {}, from_job);
  }
  if (difference.empty()) {
    difference = FirstDifference(from.data().transforms().random_crop(),
                                 to.data().transforms().random_crop(),
                                 "data.transforms.random_crop", {"size"}, {},
                                 from_job);
  }
  if (difference.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "resume_from: the checkpoint of ", from_job,
      " does not fit this spec: ", difference));
}

}  // namespace trainctl::coordinator
