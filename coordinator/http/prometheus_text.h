#pragma once

// Writes the Prometheus text exposition format 0.0.4: a HELP and a TYPE line
// per family, then its samples. Escaping follows the format: label values
// escape backslash, double quote and newline; HELP text backslash and
// newline.

#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

namespace trainctl::coordinator::http {

using Labels = std::vector<std::pair<std::string, std::string>>;

inline constexpr char kPrometheusContentType[] =
    "text/plain; version=0.0.4; charset=utf-8";

class PrometheusText {
 public:
  // Starts a family; `type` is counter, gauge, histogram or untyped. Every
  // sample written until the next Family() belongs to it.
  void Family(absl::string_view name, absl::string_view type,
              absl::string_view help);
  // `suffix` is "" or, for histograms, "_bucket", "_sum", "_count".
  void Sample(const Labels& labels, double value, absl::string_view suffix = "");
  // Cumulative buckets (`bounds` ascending, `counts[i]` observations <=
  // bounds[i], non-cumulative), the +Inf bucket, _sum and _count.
  void Histogram(const Labels& labels, const std::vector<double>& bounds,
                 const std::vector<uint64_t>& counts, uint64_t overflow,
                 double sum);
  const std::string& text() const { return out_; }

 private:
  std::string family_;
  std::string out_;
};

std::string EscapeLabelValue(absl::string_view value);
std::string EscapeHelp(absl::string_view help);
// Integers without an exponent, NaN, +Inf, -Inf, else the shortest
// decimal that reads back as the same double.
std::string FormatValue(double value);

}  // namespace trainctl::coordinator::http
