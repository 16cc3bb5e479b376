#include "common/spec_inputs.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/vocabulary.h"

namespace trainctl {
namespace {

// Beside train_path's input: a model takes a handful (a tokenizer gives 3).
constexpr int kMaxNamedInputs = 15;
constexpr char kDefaultInputName[] = "input_ids";

void ReadNamedPaths(SpecReader& s, const std::string& key,
                    google::protobuf::RepeatedPtrField<v1::NamedPath>* out,
                    std::vector<std::string>* errors) {
  const YAML::Node node = s.Child(key);
  if (!node || node.IsNull()) return;
  const std::string at = s.Path(key);
  if (!node.IsMap() && !node.IsSequence()) {
    s.Error(at, "must be a map of input name: path");
    return;
  }
  if (node.size() > kMaxNamedInputs) {
    s.Error(at, absl::StrCat("names ", node.size(), " inputs; at most ",
                             kMaxNamedInputs));
    return;
  }
  if (node.IsMap()) {
    // Read each path as any spec string is read (length, control
    // characters), so the map form refuses what the list form refuses: the
    // spec's JSON, which prints the list form, must parse back.
    SpecReader map(node, at, errors);
    for (const auto& entry : node) {
      v1::NamedPath* input = out->Add();
      input->set_name(entry.first.IsScalar() ? entry.first.Scalar() : "");
      // A name that is no identifier is refused by CheckNamedInputs, which
      // says so without quoting it.
      if (!IsInputName(input->name())) continue;
      if (entry.second.IsNull() ||
          (entry.second.IsScalar() && entry.second.Scalar().empty())) {
        map.Error(map.Path(input->name()), "must be a path");
        continue;
      }
      input->set_path(map.String(input->name(), ""));
    }
    return;
  }
  for (size_t i = 0; i < node.size(); ++i) {
    SpecReader item(node[i], absl::StrCat(at, "[", i, "]"), errors);
    v1::NamedPath* input = out->Add();
    const size_t errors_before = errors->size();
    input->set_path(item.String("path", ""));
    // Said once: a path refused as a string is not also missing.
    if (input->path().empty() && errors->size() == errors_before) {
      item.Error(item.Path("path"), "is required");
    }
    input->set_name(item.String("name", ""));
    item.RejectUnknown();
  }
}

void CheckNames(const google::protobuf::RepeatedPtrField<v1::NamedPath>& inputs,
                const std::string& field, const std::string& input_name,
                std::vector<std::string>* errors) {
  std::set<std::string> seen;
  int position = 0;
  for (const v1::NamedPath& input : inputs) {
    ++position;
    if (!IsInputName(input.name())) {
      // Not quoted: it may hold anything, control characters included.
      errors->push_back(absl::StrCat(
          field, ": input ", position, "'s name must be a Python identifier "
          "(the model's forward argument it is passed to)"));
      continue;
    }
    const std::string at = absl::StrCat(field, ".", input.name());
    if (input.name() == input_name) {
      errors->push_back(absl::StrCat(at, ": is train_path's input (data.input_name)"));
    } else if (!seen.insert(input.name()).second) {
      errors->push_back(absl::StrCat(at, ": is named twice"));
    }
  }
}

std::set<std::string> Names(const google::protobuf::RepeatedPtrField<v1::NamedPath>& inputs) {
  std::set<std::string> names;
  for (const v1::NamedPath& input : inputs) names.insert(input.name());
  return names;
}

}  // namespace

bool IsInputName(const std::string& name) {
  if (name.empty() || name.size() > 64 ||
      std::isdigit(static_cast<unsigned char>(name[0]))) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

void ReadNamedInputs(SpecReader& s, v1::DataSpec* d, std::vector<std::string>* errors) {
  ReadNamedPaths(s, "train_inputs", d->mutable_train_inputs(), errors);
  ReadNamedPaths(s, "eval_inputs", d->mutable_eval_inputs(), errors);
  d->set_input_name(s.String("input_name", d->train_inputs().empty() ? "" : kDefaultInputName));
}

void CheckNamedInputs(const v1::JobSpec& spec, std::vector<std::string>* errors) {
  const v1::DataSpec& d = spec.data();
  if (d.train_inputs().empty()) {
    if (!d.eval_inputs().empty()) {
      errors->push_back("data.eval_inputs: given without data.train_inputs");
    }
    if (!d.input_name().empty()) {
      errors->push_back(
          "data.input_name: names train_path's input only beside data.train_inputs");
    }
    return;
  }
  if (d.format() != "npy") {
    errors->push_back(absl::StrCat(
        "data.train_inputs: only for format npy (data.format is ", d.format(),
        d.format() == "tensors" ? "; a tensors file names its inputs in a dict x)" : ")"));
    return;
  }
  if (TaskOf(spec) == Task::kLanguageModel) {
    errors->push_back(
        "data.train_inputs: task language_model reads one token stream; named "
        "inputs need task classification or regression");
    return;
  }
  if (!IsInputName(d.input_name())) {
    errors->push_back("data.input_name: must be a Python identifier");
  }
  CheckNames(d.train_inputs(), "data.train_inputs", d.input_name(), errors);
  CheckNames(d.eval_inputs(), "data.eval_inputs", d.input_name(), errors);
  if (d.eval_path().empty()) {
    if (!d.eval_inputs().empty()) {
      errors->push_back("data.eval_inputs: given without data.eval_path");
    }
  } else if (Names(d.eval_inputs()) != Names(d.train_inputs())) {
    std::vector<std::string> wanted;
    for (const std::string& name : Names(d.train_inputs())) wanted.push_back(name);
    errors->push_back(absl::StrCat(
        "data.eval_inputs: must name the inputs data.train_inputs names (",
        Abbreviated(absl::StrJoin(wanted, ", "), 200), ") for the eval set of data.eval_path"));
  }
}

}  // namespace trainctl
