#include "common/shipped_files.h"

#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_digest.h"

namespace trainctl {
namespace {

// A spec ships a model and a few data files, not a data set of shards: 8
// fixed fields and up to 15 named inputs for each of train and eval.
constexpr size_t kMaxShippedFiles = 40;

// One table for both accessors, so the list of file fields is written once.
struct FileField {
  const char* name;
  const std::string& (*path)(const v1::JobSpec&);
  std::string* (*mutable_path)(v1::JobSpec*);
};

#define TRAINCTL_FILE_FIELD(section, key)                                   \
  FileField {                                                               \
    #section "." #key,                                                      \
        [](const v1::JobSpec& s) -> const std::string& {                   \
          return s.section().key();                                         \
        },                                                                  \
        [](v1::JobSpec* s) { return s->mutable_##section()->mutable_##key(); } \
  }

const FileField kFileFields[] = {
    TRAINCTL_FILE_FIELD(model, path),
    TRAINCTL_FILE_FIELD(data, train_path),
    TRAINCTL_FILE_FIELD(data, eval_path),
    TRAINCTL_FILE_FIELD(data, train_images),
    TRAINCTL_FILE_FIELD(data, train_labels),
    TRAINCTL_FILE_FIELD(data, eval_images),
    TRAINCTL_FILE_FIELD(data, eval_labels),
    TRAINCTL_FILE_FIELD(data, tokenizer),
};

#undef TRAINCTL_FILE_FIELD

// data.train_inputs.NAME and data.eval_inputs.NAME: one field per input.
constexpr char kTrainInputs[] = "data.train_inputs.";
constexpr char kEvalInputs[] = "data.eval_inputs.";

// The named input `field` stands for, or null.
const v1::NamedPath* FindNamedInput(const v1::JobSpec& spec, const std::string& field) {
  for (const auto& [prefix, inputs] :
       {std::make_pair(kTrainInputs, &spec.data().train_inputs()),
        std::make_pair(kEvalInputs, &spec.data().eval_inputs())}) {
    const size_t length = std::char_traits<char>::length(prefix);
    if (field.compare(0, length, prefix) != 0) continue;
    for (const v1::NamedPath& input : *inputs) {
      if (input.name() == field.substr(length)) return &input;
    }
  }
  return nullptr;
}

}  // namespace

const std::vector<std::string>& ShippableFields() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const FileField& f : kFileFields) names.emplace_back(f.name);
    names.push_back(std::string(kTrainInputs) + "NAME");
    names.push_back(std::string(kEvalInputs) + "NAME");
    return names;
  }();
  return kNames;
}

std::vector<std::string> SpecFileFields(const v1::JobSpec& spec) {
  std::vector<std::string> fields;
  for (const FileField& f : kFileFields) fields.emplace_back(f.name);
  for (const v1::NamedPath& input : spec.data().train_inputs()) {
    fields.push_back(kTrainInputs + input.name());
  }
  for (const v1::NamedPath& input : spec.data().eval_inputs()) {
    fields.push_back(kEvalInputs + input.name());
  }
  return fields;
}

std::string* MutableSpecFilePath(v1::JobSpec* spec, const std::string& field) {
  for (const FileField& f : kFileFields) {
    if (field == f.name) return f.mutable_path(spec);
  }
  // The element lives in *spec, which the caller may change.
  const v1::NamedPath* input = FindNamedInput(*spec, field);
  return input == nullptr ? nullptr : const_cast<v1::NamedPath*>(input)->mutable_path();
}

const std::string* SpecFilePath(const v1::JobSpec& spec, const std::string& field) {
  for (const FileField& f : kFileFields) {
    if (field == f.name) return &f.path(spec);
  }
  const v1::NamedPath* input = FindNamedInput(spec, field);
  return input == nullptr ? nullptr : &input->path();
}

bool IsSubmitterPath(const std::string& path) {
  return !path.empty() && path.front() != '/';
}

void ReadShippedFiles(SpecReader& top, v1::JobSpec* spec,
                      std::vector<std::string>* errors) {
  const YAML::Node list = top.Child("shipped_files");
  if (!list || list.IsNull()) return;
  if (!list.IsSequence()) {
    top.Error("shipped_files", "must be a list of {field, path, sha256, size}");
    return;
  }
  if (list.size() > kMaxShippedFiles) {
    top.Error("shipped_files", absl::StrCat("lists ", list.size(),
                                            " files; at most ", kMaxShippedFiles,
                                            " are shipped with a job"));
    return;
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = absl::StrCat("shipped_files[", i, "]");
    SpecReader s(list[i], at, errors);
    v1::ShippedFile* file = spec->add_shipped_files();
    file->set_field(s.String("field", ""));
    file->set_path(s.String("path", ""));
    file->set_sha256(s.String("sha256", ""));
    file->set_size(s.Int("size", 0, 0, int64_t{1} << 50));
    s.RejectUnknown();
    const std::string* value = SpecFilePath(*spec, file->field());
    if (value == nullptr) {
      s.Error(s.Path("field"),
              absl::StrCat("'", Abbreviated(file->field()), "' is not a file field (",
                           absl::StrJoin(ShippableFields(), ", "), ")"));
      continue;
    }
    if (!seen.insert(file->field()).second) {
      s.Error(s.Path("field"), absl::StrCat(file->field(), " is listed twice"));
    }
    if (!IsSubmitterPath(file->path())) {
      s.Error(s.Path("path"), "must be the field's relative path");
    } else if (*value != file->path()) {
      s.Error(s.Path("path"),
              absl::StrCat("'", Abbreviated(file->path()), "' is not the value of ",
                           file->field(), " ('", Abbreviated(*value), "')"));
    }
    if (!IsSha256Hex(file->sha256())) {
      s.Error(s.Path("sha256"), "must be 64 lowercase hex digits");
    }
  }
}

std::vector<std::string> UnshippedRelativePaths(const v1::JobSpec& spec) {
  std::set<std::string> shipped;
  for (const v1::ShippedFile& f : spec.shipped_files()) shipped.insert(f.field());
  std::vector<std::string> problems;
  for (const std::string& field : SpecFileFields(spec)) {
    const std::string* value = SpecFilePath(spec, field);
    if (IsSubmitterPath(*value) && shipped.count(field) == 0) {
      problems.push_back(absl::StrCat(
          field, ": '", Abbreviated(*value),
          "' is a relative path, which names a file on the submitter's machine "
          "that was not uploaded: submit with trainctl (it uploads such files), "
          "or give an absolute path on the workers"));
    }
  }
  return problems;
}

}  // namespace trainctl
