#include "common/spec_reader.h"

#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/closest_name.h"
#include "common/utf8_sanitize.h"

namespace trainctl {
namespace {

std::string Shown(const YAML::Node& n) {
  if (!n.IsScalar()) return "<a list or mapping>";
  return Abbreviated(n.Scalar());
}

// "12345678901234567890123" parses as no int64_t, but it is a number: say it
// is out of range rather than "must be an integer".
bool LooksInteger(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

}  // namespace

std::string Abbreviated(const std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t cut = max_bytes;
  // Back off to the start of a character, so the message stays UTF-8.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "...";
}

SpecReader::SpecReader(const YAML::Node& node, std::string path,
                       std::vector<std::string>* errors)
    : node_(node), path_(std::move(path)), errors_(errors) {
  if (node_ && !node_.IsNull() && !node_.IsMap()) {
    Error(path_.empty() ? "spec" : path_, "must be a mapping");
    valid_ = false;
  }
}

std::string SpecReader::Path(const std::string& key) const {
  return path_.empty() ? key : absl::StrCat(path_, ".", key);
}

YAML::Node SpecReader::Child(const std::string& key) {
  used_.insert(key);
  if (!valid_ || !node_ || node_.IsNull()) return YAML::Node();
  return node_[key];
}

bool SpecReader::Has(const std::string& key) {
  YAML::Node n = Child(key);
  return n && !n.IsNull();
}

std::string SpecReader::String(const std::string& key,
                               const std::string& fallback) {
  YAML::Node n = Child(key);
  if (!n || n.IsNull()) return fallback;
  if (!n.IsScalar()) {
    Error(Path(key), "must be a string");
    return fallback;
  }
  // Every string a spec holds is a name, a choice or a path: a longer one
  // is a mistake or an attempt to make the coordinator store and copy it.
  if (n.Scalar().size() > kMaxSpecStringBytes) {
    Error(Path(key), absl::StrCat("is ", n.Scalar().size(),
                                  " bytes; at most ", kMaxSpecStringBytes,
                                  " are allowed"));
    return fallback;
  }
  // Names, columns and paths reach tables, logs and error messages: an ESC
  // sequence or a newline there would act on an operator's terminal.
  if (HasControlCharacters(n.Scalar())) {
    Error(Path(key), "must not contain control characters (tab is allowed)");
    return fallback;
  }
  return n.Scalar();
}

std::string SpecReader::Choice(const std::string& key,
                               const std::string& fallback,
                               const std::vector<std::string>& allowed,
                               const std::string& noun) {
  std::string value = String(key, fallback);
  for (const auto& a : allowed) {
    if (a == value) return value;
  }
  Error(Path(key),
        absl::StrCat("unknown ", noun, " '", Abbreviated(value),
                     "' (known: ", absl::StrJoin(allowed, ", "), ")"));
  return fallback;
}

int64_t SpecReader::Int(const std::string& key, int64_t fallback, int64_t min,
                        int64_t max) {
  YAML::Node n = Child(key);
  if (!n || n.IsNull()) return fallback;
  int64_t value = 0;
  if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, value)) {
    if (n.IsScalar() && LooksInteger(n.Scalar())) {
      Error(Path(key),
            absl::StrCat("must be in [", min, ", ", max, "], got ", Shown(n)));
    } else {
      Error(Path(key),
            absl::StrCat("must be an integer, got '", Shown(n), "'"));
    }
    return fallback;
  }
  if (value < min || value > max) {
    Error(Path(key),
          absl::StrCat("must be in [", min, ", ", max, "], got ", value));
    return fallback;
  }
  return value;
}

double SpecReader::Double(const std::string& key, double fallback, double min,
                          double max) {
  YAML::Node n = Child(key);
  if (!n || n.IsNull()) return fallback;
  double value = 0;
  if (!n.IsScalar() || !YAML::convert<double>::decode(n, value) ||
      !std::isfinite(value)) {
    Error(Path(key),
          absl::StrCat("must be a finite number, got '", Shown(n), "'"));
    return fallback;
  }
  if (value < min || value > max) {
    Error(Path(key),
          absl::StrCat("must be in [", min, ", ", max, "], got ", value));
    return fallback;
  }
  return value;
}

double SpecReader::PositiveDouble(const std::string& key, double fallback,
                                  double max) {
  // Finiteness from Double; the range here, so one message covers both ends.
  const double value = Double(key, fallback, std::numeric_limits<double>::lowest(),
                              std::numeric_limits<double>::max());
  if (value <= 0 || value > max) {
    Error(Path(key), absl::StrCat("must be in (0, ", max, "], got ", value));
    return fallback;
  }
  return value;
}

bool SpecReader::Bool(const std::string& key, bool fallback) {
  YAML::Node n = Child(key);
  if (!n || n.IsNull()) return fallback;
  bool value = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, value)) {
    Error(Path(key),
          absl::StrCat("must be true or false, got '", Shown(n), "'"));
    return fallback;
  }
  return value;
}

std::vector<int64_t> SpecReader::IntList(const std::string& key,
                                         const std::vector<int64_t>& fallback,
                                         size_t max_items, int64_t min,
                                         int64_t max) {
  YAML::Node n = Child(key);
  if (!n || n.IsNull()) return fallback;
  if (!n.IsSequence() || n.size() == 0 || n.size() > max_items) {
    Error(Path(key),
          absl::StrCat("must be a list of 1 to ", max_items, " integers"));
    return fallback;
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < n.size(); ++i) {
    int64_t v = 0;
    if (!n[i].IsScalar() || !YAML::convert<int64_t>::decode(n[i], v) ||
        v < min || v > max) {
      Error(absl::StrCat(Path(key), "[", i, "]"),
            absl::StrCat("must be an integer in [", min, ", ", max, "]"));
      return fallback;
    }
    out.push_back(v);
  }
  return out;
}

std::vector<double> SpecReader::DoubleList(const std::string& key,
                                           size_t max_items, double min,
                                           double max) {
  YAML::Node n = Child(key);
  if (!n || n.IsNull()) return {};
  if (!n.IsSequence() || n.size() > max_items) {
    Error(Path(key), absl::StrCat("must be a list of up to ", max_items, " numbers"));
    return {};
  }
  std::vector<double> out;
  for (size_t i = 0; i < n.size(); ++i) {
    double v = 0;
    if (!n[i].IsScalar() || !YAML::convert<double>::decode(n[i], v) ||
        !std::isfinite(v) || v < min || v > max) {
      Error(absl::StrCat(Path(key), "[", i, "]"),
            absl::StrCat("must be a number in [", min, ", ", max, "]"));
      return {};
    }
    out.push_back(v);
  }
  return out;
}

void SpecReader::RejectUnknown() {
  if (!valid_ || !node_ || !node_.IsMap()) return;
  for (const auto& kv : node_) {
    std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "<complex key>";
    if (used_.count(key)) continue;
    // Every field of the mapping was asked for by now: a near one is
    // what was meant. Only for errors that will be shown, so a spec of
    // 100k unknown keys costs no 100k searches.
    const std::string near =
        errors_->size() < kMaxSpecErrors
            ? ClosestName(key, std::vector<std::string>(used_.begin(), used_.end()))
            : "";
    Error(Path(Abbreviated(key)),
          near.empty() ? "unknown field"
                       : absl::StrCat("unknown field; did you mean ", near, "?"));
  }
}

void SpecReader::Error(const std::string& field, const std::string& what) {
  errors_->push_back(absl::StrCat(field, ": ", what));
}

}  // namespace trainctl
