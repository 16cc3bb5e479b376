#include "coordinator/scheduling_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/closest_name.h"
#include "common/spec_reader.h"

namespace trainctl::coordinator {
namespace {

using Errors = std::vector<std::string>;

constexpr int64_t kMaxSlots = 1 << 20;
constexpr int kMaxClassValue = 1'000'000;
constexpr int64_t kMaxGraceSeconds = 24 * 3600;
constexpr size_t kMaxFileBytes = 4 << 20;  // thousands of users fit in 1 MiB

// Class names appear in specs, tables and events: short, plain words.
bool IsClassName(const std::string& name) {
  if (name.empty() || name.size() > 32) return false;
  for (char c : name) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (!absl::ascii_islower(u) && !absl::ascii_isdigit(u) && c != '-' &&
        c != '_') {
      return false;
    }
  }
  return true;
}

std::string Known(const std::vector<std::string>& names) {
  return names.empty() ? "none are defined" : absl::StrJoin(names, ", ");
}

// "unknown class 'hgih' (did you mean 'high'? known: low, high)"
std::string Unknown(const char* what, const std::string& name,
                    const std::vector<std::string>& known) {
  const std::string closest = ClosestName(name, known);
  return absl::StrCat("unknown ", what, " '", Abbreviated(name), "' (",
                      closest.empty() ? "" : absl::StrCat("did you mean '",
                                                          closest, "'? "),
                      "known: ", Known(known), ")");
}

Quota ReadQuota(SpecReader& s) {
  Quota q;
  q.slots = static_cast<int>(s.Int("slots", -1, 0, kMaxSlots));
  q.gpus = static_cast<int>(s.Int("gpus", -1, 0, kMaxSlots));
  q.borrow = s.Bool("borrow", false);
  return q;
}

void ReadClasses(const YAML::Node& node, SchedulingConfig* config,
                 Errors* errors) {
  if (!node || node.IsNull()) return;
  if (!node.IsMap()) {
    errors->push_back("classes: must be a mapping of class name to value "
                      "(low: 0, normal: 100, high: 1000)");
    return;
  }
  for (const auto& entry : node) {
    const std::string name = entry.first.Scalar();
    const std::string path = absl::StrCat("classes.", Abbreviated(name));
    if (!IsClassName(name)) {
      errors->push_back(absl::StrCat(
          path, ": a class name is 1 to 32 of a-z, 0-9, '-' and '_'"));
      continue;
    }
    PriorityClass c;
    c.name = name;
    if (entry.second.IsMap()) {
      // {value: 100, grace_seconds: 300}
      SpecReader s(entry.second, path, errors);
      if (!s.Has("value")) s.Error(s.Path("value"), "is required");
      c.value = static_cast<int>(
          s.Int("value", 0, -kMaxClassValue, kMaxClassValue));
      c.grace_ms = 1000 * s.Int("grace_seconds", c.grace_ms / 1000, 0,
                                kMaxGraceSeconds);
      s.RejectUnknown();
    } else if (!entry.second.IsScalar() ||
               !YAML::convert<int>::decode(entry.second, c.value) ||
               c.value < -kMaxClassValue || c.value > kMaxClassValue) {
      errors->push_back(absl::StrCat(path, ": must be an integer in [",
                                     -kMaxClassValue, ", ", kMaxClassValue,
                                     "] (higher starts first), or {value: N, "
                                     "grace_seconds: S}"));
      continue;
    }
    config->classes.push_back(c);
  }
  std::stable_sort(config->classes.begin(), config->classes.end(),
                   [](const PriorityClass& a, const PriorityClass& b) {
                     return a.value > b.value;
                   });
}

std::vector<std::string> ClassNames(const SchedulingConfig& config) {
  std::vector<std::string> names;
  for (const PriorityClass& c : config.classes) names.push_back(c.name);
  return names;
}

void ReadUsers(SpecReader& top, SchedulingConfig* config, Errors* errors) {
  const YAML::Node node = top.Child("users");
  if (!node || node.IsNull()) return;
  if (!node.IsMap()) {
    errors->push_back("users: must be a mapping of user name (or \"*\") to "
                      "its quota");
    return;
  }
  for (const auto& entry : node) {
    const std::string user = entry.first.Scalar();
    SpecReader s(entry.second, absl::StrCat("users.", Abbreviated(user)),
                 errors);
    if (s.Has("slots") || s.Has("gpus") || s.Has("borrow")) {
      config->user_quotas[user] = ReadQuota(s);
    }
    const std::string max_class = s.String("max_class", "");
    if (!max_class.empty()) config->max_class_of_user[user] = max_class;
    const std::string group = s.String("group", "");
    if (!group.empty()) {
      if (user == "*") {
        s.Error(s.Path("group"), "only a named user belongs to a group");
      } else {
        config->group_of_user[user] = group;
      }
    }
    s.RejectUnknown();
  }
}

void ReadGroups(SpecReader& top, SchedulingConfig* config, Errors* errors) {
  const YAML::Node node = top.Child("groups");
  if (!node || node.IsNull()) return;
  if (!node.IsMap()) {
    errors->push_back("groups: must be a mapping of group name to its quota");
    return;
  }
  for (const auto& entry : node) {
    const std::string group = entry.first.Scalar();
    SpecReader s(entry.second, absl::StrCat("groups.", Abbreviated(group)),
                 errors);
    config->group_quotas[group] = ReadQuota(s);
    s.RejectUnknown();
  }
}

// The names users and the default refer to must exist: a typo would
// otherwise silently give a user no limit.
void CheckReferences(const SchedulingConfig& config, Errors* errors) {
  const std::vector<std::string> classes = ClassNames(config);
  if (config.FindClass(config.default_class) == nullptr) {
    errors->push_back(absl::StrCat(
        "default_class: ", Unknown("class", config.default_class, classes)));
  }
  for (const auto& [user, name] : config.max_class_of_user) {
    if (config.FindClass(name) == nullptr) {
      errors->push_back(absl::StrCat("users.", Abbreviated(user),
                                     ".max_class: ",
                                     Unknown("class", name, classes)));
    }
  }
  std::vector<std::string> groups;
  for (const auto& entry : config.group_quotas) groups.push_back(entry.first);
  for (const auto& [user, group] : config.group_of_user) {
    if (config.group_quotas.count(group) == 0) {
      errors->push_back(absl::StrCat("users.", Abbreviated(user), ".group: ",
                                     Unknown("group", group, groups)));
    }
  }
}

}  // namespace

const PriorityClass* SchedulingConfig::FindClass(const std::string& name) const {
  for (const PriorityClass& c : classes) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

int SchedulingConfig::ValueOf(const std::string& name) const {
  const PriorityClass* c = FindClass(name);
  if (c == nullptr) c = FindClass(default_class);
  return c == nullptr ? 0 : c->value;
}

int64_t SchedulingConfig::GraceOf(const std::string& name) const {
  const PriorityClass* c = FindClass(name);
  if (c == nullptr) c = FindClass(default_class);
  return c == nullptr ? PriorityClass().grace_ms : c->grace_ms;
}

absl::StatusOr<PriorityClass> SchedulingConfig::Resolve(
    const std::string& requested, const std::string& user) const {
  const std::string name = requested.empty() ? default_class : requested;
  const PriorityClass* wanted = FindClass(name);
  if (wanted == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "priority: ", Unknown("priority class", name, ClassNames(*this)),
        "; the coordinator's operator defines them in ", origin));
  }
  auto max = max_class_of_user.find(user);
  if (max == max_class_of_user.end()) max = max_class_of_user.find("*");
  // The default class is everyone's: a spec that names none is never
  // refused for it.
  if (max != max_class_of_user.end() && !requested.empty()) {
    const PriorityClass* limit = FindClass(max->second);
    if (limit != nullptr && wanted->value > limit->value) {
      return absl::InvalidArgumentError(absl::StrCat(
          "priority: class '", wanted->name, "' (", wanted->value,
          ") is above the highest ",
          user.empty() ? "an unauthenticated user" : absl::StrCat("user ", user),
          " may ask for, '", limit->name, "' (", limit->value, ")"));
    }
  }
  return *wanted;
}

SchedulingConfig DefaultSchedulingConfig() {
  SchedulingConfig config;
  config.classes = {PriorityClass{"normal", 0}};
  config.default_class = "normal";
  config.origin = "the built-in default (no --scheduling file)";
  return config;
}

absl::StatusOr<SchedulingConfig> ParseSchedulingConfig(
    const std::string& text, const std::string& origin) {
  const auto fail = [&origin](const Errors& errors) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": ", absl::StrJoin(errors, "; ")));
  };
  YAML::Node root;
  try {
    Errors shape = CheckSpecShape(text);
    if (!shape.empty()) return fail(shape);
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return fail({absl::StrCat("not valid YAML: ", e.what())});
  }
  SchedulingConfig config = DefaultSchedulingConfig();
  config.origin = origin;
  if (!root || root.IsNull()) return config;  // an empty file: the default
  Errors errors;
  SpecReader top(root, "", &errors);
  if (!root.IsMap()) return fail({"must be a mapping (classes, users, ...)"});
  if (top.Has("classes")) {
    config.classes.clear();
    ReadClasses(top.Child("classes"), &config, &errors);
    if (config.classes.empty() && errors.empty()) {
      errors.push_back("classes: must define at least one class");
    }
  }
  const std::string only =
      config.classes.size() == 1 ? config.classes.front().name : "";
  config.default_class = top.String("default_class", only.empty() ? "normal" : only);
  if (!top.Has("default_class") && config.classes.size() > 1) {
    errors.push_back("default_class: is required when there are several "
                     "classes (the class of a job whose spec names none)");
  }
  {
    SpecReader fair(top.Child("fair_share"), "fair_share", &errors);
    config.half_life_hours =
        fair.PositiveDouble("half_life_hours", config.half_life_hours, 24 * 365);
    fair.RejectUnknown();
  }
  config.backfill = top.Bool("backfill", true);
  config.preemption = top.Bool("preemption", true);
  ReadUsers(top, &config, &errors);
  ReadGroups(top, &config, &errors);
  top.RejectUnknown();
  if (errors.empty()) CheckReferences(config, &errors);
  if (!errors.empty()) return fail(errors);
  return config;
}

absl::StatusOr<SchedulingConfig> LoadSchedulingConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    const std::string why = absl::StrCat("--scheduling ", path, ": cannot read (",
                                         std::strerror(err), ")");
    return err == EACCES ? absl::PermissionDeniedError(why)
                         : absl::NotFoundError(why);
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > kMaxFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", text.str().size(), " bytes is over the limit of ",
        kMaxFileBytes));
  }
  return ParseSchedulingConfig(text.str(), path);
}

}  // namespace trainctl::coordinator
