#include "client/spec_edit.h"

#include <yaml-cpp/yaml.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/spec_reader.h"

namespace trainctl::client {
namespace {

const char* KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Null:
      return "null";
    default:
      return "not a mapping";
  }
}

absl::Status ApplySet(YAML::Node& root, const std::string& set) {
  const size_t eq = set.find('=');
  if (eq == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--set '", set, "': expected KEY.PATH=VALUE (e.g. training.epochs=3)"));
  }
  const std::string path = set.substr(0, eq);
  const std::vector<std::string> keys = absl::StrSplit(path, '.');
  for (const std::string& key : keys) {
    if (key.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--set '", set, "': the path '", path, "' has an empty key"));
    }
  }
  YAML::Node value;
  try {
    value = YAML::Load(set.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--set '", set, "': the value is not valid YAML: ", e.msg));
  }
  // A scalar is set as its text; the spec reader decides its type per field.
  if (value.IsScalar()) value = YAML::Node(value.Scalar());

  // `Node::operator=` would write through to the tree; reset() re-points.
  YAML::Node node;
  node.reset(root);
  std::string walked;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    walked = walked.empty() ? keys[i] : absl::StrCat(walked, ".", keys[i]);
    YAML::Node next;
    size_t index = 0;
    if (node.IsSequence() && absl::SimpleAtoi(keys[i], &index) &&
        index < node.size()) {
      next.reset(node[index]);
    } else if (node.IsMap()) {
      if (!node[keys[i]]) node[keys[i]] = YAML::Node(YAML::NodeType::Map);
      next.reset(node[keys[i]]);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--set '", set, "': cannot go into ", walked, ": ",
                       i == 0 ? "the spec" : "it", " is ", KindName(node)));
    }
    if (!next.IsMap() && !next.IsSequence()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--set '", set, "': cannot set a key inside ", walked,
                       ": it is ", KindName(next), ", not a mapping"));
    }
    node.reset(next);
  }
  const std::string& last = keys.back();
  size_t index = 0;
  if (node.IsSequence()) {
    if (!absl::SimpleAtoi(last, &index) || index >= node.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--set '", set, "': ", walked, " is a list of ", node.size(),
          " items; '", last, "' is not an index into it"));
    }
    node[index] = value;
  } else {
    node[last] = value;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ApplySpecEdits(const std::string& text,
                                           const SpecEdits& edits) {
  if (edits.sets.empty() && edits.name.empty()) return text;
  YAML::Node root;
  try {
    // The same checks the coordinator makes first: a duplicate key would
    // otherwise vanish in the round trip instead of being refused.
    std::vector<std::string> problems = CheckSpecShape(text);
    if (!problems.empty()) {
      return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
    }
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec: not valid YAML: ", e.what()));
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        "spec: must be a mapping of fields (name:, ranks:, model:, ...)");
  }
  for (const std::string& set : edits.sets) {
    absl::Status applied = ApplySet(root, set);
    if (!applied.ok()) return applied;
  }
  if (!edits.name.empty()) root["name"] = YAML::Node(edits.name);
  YAML::Emitter out;
  out << root;
  if (!out.good()) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec: cannot write the edited spec: ", out.GetLastError()));
  }
  return std::string(out.c_str()) + "\n";
}

}  // namespace trainctl::client
