#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace trainctl {

// Limits on a spec's YAML, checked by CheckSpecShape before any field is read
// (docs/job-spec.md, "Limits"). A real spec is 4 levels deep and a few
// hundred nodes; these bounds leave room and keep a hostile one cheap.
inline constexpr int kMaxSpecDepth = 32;
inline constexpr int64_t kMaxSpecNodes = 100'000;  // after expanding aliases
inline constexpr size_t kMaxSpecErrors = 50;
// Any one string value (names, choices, paths: PATH_MAX is 4096).
inline constexpr size_t kMaxSpecStringBytes = 4096;

// Walks the YAML events of `text` (spec_shape.cc; no tree is built) and
// returns the problems yaml-cpp would otherwise hide or choke on, each "path:
// what": a key given twice (yaml-cpp silently keeps the first), an empty,
// null or non-scalar key, a string that is not UTF-8 (protobuf refuses to
// serialize those), more than one document, nesting deeper than
// kMaxSpecDepth, and more than kMaxSpecNodes nodes counting every alias
// expansion ("billion laughs"). The last two stop the walk at once. Throws
// YAML::Exception on YAML syntax errors.
std::vector<std::string> CheckSpecShape(const std::string& text);

// True when `s` is well-formed UTF-8 (no overlong forms, no surrogates);
// otherwise *bad_offset is the offset of the first bad byte.
bool IsValidUtf8(const std::string& s, size_t* bad_offset);

// At most `max_bytes` of `s`, cut at a character boundary, with "..." when
// cut: for echoing user input in error messages.
std::string Abbreviated(const std::string& s, size_t max_bytes = 40);

// Reads the fields of one YAML mapping of a job spec. Each getter returns
// the field's value, or the fallback when the field is absent, and records a
// problem naming the field path when the value is malformed or out of range.
// RejectUnknown reports the keys no getter asked for. Not thread-safe; one
// reader per mapping during one parse.
class SpecReader {
 public:
  SpecReader(const YAML::Node& node, std::string path,
             std::vector<std::string>* errors);

  // "optimizer.lr" for key "lr" of section "optimizer".
  std::string Path(const std::string& key) const;
  // The raw child node (marks the key as known).
  YAML::Node Child(const std::string& key);
  bool Has(const std::string& key);

  std::string String(const std::string& key, const std::string& fallback);
  // A string that must be one of `allowed`; the error calls it `noun`
  // ("unknown optimizer 'lion' (known: ...)").
  std::string Choice(const std::string& key, const std::string& fallback,
                     const std::vector<std::string>& allowed,
                     const std::string& noun = "value");
  int64_t Int(const std::string& key, int64_t fallback, int64_t min,
              int64_t max);
  double Double(const std::string& key, double fallback, double min,
                double max);
  // A number in (0, max]: zero is out of range too, and the error says so.
  double PositiveDouble(const std::string& key, double fallback, double max);
  bool Bool(const std::string& key, bool fallback);
  // A list of 1..max_items integers, each in [min, max].
  std::vector<int64_t> IntList(const std::string& key,
                               const std::vector<int64_t>& fallback,
                               size_t max_items, int64_t min, int64_t max);

  // A list of up to max_items finite numbers, each in [min, max] (an
  // empty list, as JSON prints an unset one, is none).
  std::vector<double> DoubleList(const std::string& key, size_t max_items,
                                 double min, double max);

  void RejectUnknown();
  void Error(const std::string& field, const std::string& what);

 private:
  YAML::Node node_;
  std::string path_;
  std::vector<std::string>* errors_;
  std::set<std::string> used_;
  bool valid_ = true;
};

}  // namespace trainctl
