#include "coordinator/http/prometheus_text.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace trainctl::coordinator::http {

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(absl::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  // The shortest form that reads back as the same double: 0.1, not
  // 0.10000000000000001.
  char buf[32];
  for (int precision = 15; precision <= 17; ++precision) {
    snprintf(buf, sizeof(buf), "%.*g", precision, value);
    if (strtod(buf, nullptr) == value) break;
  }
  return buf;
}

void PrometheusText::Family(absl::string_view name, absl::string_view type,
                            absl::string_view help) {
  family_ = std::string(name);
  absl::StrAppend(&out_, "# HELP ", name, " ", EscapeHelp(help), "\n",
                  "# TYPE ", name, " ", type, "\n");
}

void PrometheusText::Sample(const Labels& labels, double value,
                            absl::string_view suffix) {
  absl::StrAppend(&out_, family_, suffix);
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      absl::StrAppend(&out_, i > 0 ? "," : "", labels[i].first, "=\"",
                      EscapeLabelValue(labels[i].second), "\"");
    }
    out_ += '}';
  }
  absl::StrAppend(&out_, " ", FormatValue(value), "\n");
}

void PrometheusText::Histogram(const Labels& labels,
                               const std::vector<double>& bounds,
                               const std::vector<uint64_t>& counts,
                               uint64_t overflow, double sum) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    cumulative += i < counts.size() ? counts[i] : 0;
    Labels with_le = labels;
    with_le.emplace_back("le", FormatValue(bounds[i]));
    Sample(with_le, static_cast<double>(cumulative), "_bucket");
  }
  cumulative += overflow;
  Labels inf = labels;
  inf.emplace_back("le", "+Inf");
  Sample(inf, static_cast<double>(cumulative), "_bucket");
  Sample(labels, sum, "_sum");
  Sample(labels, static_cast<double>(cumulative), "_count");
}

}  // namespace trainctl::coordinator::http
