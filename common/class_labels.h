#pragma once

// Class labels given as text (an audio manifest's, a CSV text column's
// label column): class ids when every training label is an integer in
// [0, 2^24), else class names, numbered in byte order of the training
// set's distinct names. Errors name the field, file and line, never a label.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainctl {

// A training set's classes from all its labels: none when every label is a
// class id, so ids are the labels; otherwise the distinct labels in byte
// order, id i being name i. INVALID_ARGUMENT naming `field` past 65536 names.
absl::StatusOr<std::vector<std::string>> ClassNamesOf(const std::vector<std::string>& labels,
                                                      const std::string& field);

// Each label's class id under `class_names` (ClassNamesOf the training set);
// lines[i] is label i's line in `file`. INVALID_ARGUMENT "FIELD: FILE: line
// N: ..." for a label that is no id (classes by id) or names no class.
absl::StatusOr<std::vector<int64_t>> ClassIdsOf(const std::vector<std::string>& labels,
                                                const std::vector<int64_t>& lines,
                                                const std::vector<std::string>& class_names,
                                                const std::string& field,
                                                const std::string& file);

}  // namespace trainctl
