#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace trainctl {

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
  bool Bool(const std::string& key, bool fallback);
  // A list of 1..max_items integers, each in [min, max].
  std::vector<int64_t> IntList(const std::string& key,
                               const std::vector<int64_t>& fallback,
                               size_t max_items, int64_t min, int64_t max);

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
