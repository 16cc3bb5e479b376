#include "common/class_labels.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace trainctl {
namespace {

// The largest class id a model may have (model.num_classes' bound).
constexpr int64_t kMaxClassId = (int64_t{1} << 24) - 1;
// Classes by name: more than any classifier head a spec makes sense of.
constexpr size_t kMaxClassNames = size_t{1} << 16;

bool ClassId(const std::string& label, int64_t* id) {
  return absl::SimpleAtoi(label, id) && *id >= 0 && *id <= kMaxClassId;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ClassNamesOf(const std::vector<std::string>& labels,
                                                      const std::string& field) {
  int64_t id = 0;
  const bool by_id = std::all_of(labels.begin(), labels.end(),
                                 [&](const std::string& label) { return ClassId(label, &id); });
  if (by_id) return std::vector<std::string>();
  std::set<std::string> names;
  for (const std::string& label : labels) {
    names.insert(label);
    if (names.size() > kMaxClassNames) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": its labels name more than ", kMaxClassNames, " classes"));
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

absl::StatusOr<std::vector<int64_t>> ClassIdsOf(const std::vector<std::string>& labels,
                                                const std::vector<int64_t>& lines,
                                                const std::vector<std::string>& class_names,
                                                const std::string& field,
                                                const std::string& file) {
  std::vector<int64_t> ids;
  ids.reserve(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    const std::string& label = labels[i];
    const int64_t line = i < lines.size() ? lines[i] : 0;
    int64_t id = 0;
    if (class_names.empty()) {
      if (!ClassId(label, &id)) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ": ", file, ": line ", line, ": the label is not a class id (an integer "
            "in [0, ", kMaxClassId, "]), as every label of the training set is"));
      }
    } else {
      const auto at = std::lower_bound(class_names.begin(), class_names.end(), label);
      if (at == class_names.end() || *at != label) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ": ", file, ": line ", line, ": the label names no class of the training set"));
      }
      id = at - class_names.begin();
    }
    ids.push_back(id);
  }
  return ids;
}

}  // namespace trainctl
