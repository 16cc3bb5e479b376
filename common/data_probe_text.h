#pragma once

// The data probe's counting of text (internal to trainctl_data_probe):
// files it parses whole (CSV text columns, audio manifests) and text under
// data.tokenizer, whose windows only the tokenizer can count.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/data_probe.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl {

// The whole of `path` (named by `field`); RESOURCE_EXHAUSTED over the read
// limit, when the ranks count its rows instead.
absl::StatusOr<std::string> ReadWithinLimit(const std::string& field, const std::string& path,
                                            const DataProbeLimits& limits);

// Rows of a CSV file with data.text_column: records, whose quoted cells
// may span lines, parsed as the ranks parse them.
absl::StatusOr<int64_t> CsvTextRowCount(const std::string& field, const std::string& path,
                                        const v1::DataSpec& data, int64_t limit,
                                        const DataProbeLimits& limits);

// Next-token windows of a text file under data.tokenizer: trainctl-tokenizer
// encodes it (the ids thrown away) within the probe's deadline, as the
// ranks will.
absl::StatusOr<int64_t> TokenizedTextWindowCount(const std::string& field,
                                                 const std::string& path,
                                                 const v1::DataSpec& data, int64_t limit,
                                                 const DataProbeLimits& limits);

}  // namespace trainctl
