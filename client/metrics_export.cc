#include "client/metrics_export.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/json_text.h"

namespace trainctl::client {
namespace {

constexpr const char* kFixedColumns =
    "seq,time_unix_ms,kind,step,epoch,rank";

}  // namespace

MetricRow MetricRowFromEvent(const v1::JobEvent& event) {
  MetricRow row;
  row.seq = event.seq();
  row.point = event.metric();
  row.time_unix_ms = row.point.time_unix_ms() != 0 ? row.point.time_unix_ms()
                                                   : event.time_unix_ms();
  return row;
}

std::vector<std::string> MetricValueColumns(
    const std::vector<MetricRow>& rows) {
  std::set<std::string> keys;
  for (const MetricRow& row : rows) {
    for (const auto& [key, value] : row.point.values()) keys.insert(key);
  }
  return {keys.begin(), keys.end()};
}

std::string CsvCell(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\"", "\"\""}}),
                      "\"");
}

std::string MetricsCsvHeader(const std::vector<std::string>& value_columns) {
  std::string out = kFixedColumns;
  for (const std::string& key : value_columns) {
    absl::StrAppend(&out, ",", CsvCell(key));
  }
  out += "\n";
  return out;
}

std::string MetricCsvRow(const MetricRow& row,
                         const std::vector<std::string>& value_columns) {
  const v1::MetricPoint& p = row.point;
  std::string out = absl::StrCat(row.seq, ",", row.time_unix_ms, ",",
                                 CsvCell(p.kind()), ",", p.step(), ",",
                                 p.epoch(), ",", p.rank());
  for (const std::string& key : value_columns) {
    out += ",";
    auto it = p.values().find(key);
    if (it != p.values().end()) out += ShortestDouble(it->second);
  }
  out += "\n";
  return out;
}

std::string MetricsLongCsvHeader() {
  return "seq,time_unix_ms,kind,step,epoch,rank,metric,value\n";
}

std::string MetricLongCsvRows(const MetricRow& row) {
  const v1::MetricPoint& p = row.point;
  const std::string prefix = absl::StrCat(row.seq, ",", row.time_unix_ms, ",",
                                          CsvCell(p.kind()), ",", p.step(), ",",
                                          p.epoch(), ",", p.rank(), ",");
  // The proto map has no order; rows follow the keys' order.
  std::map<std::string, double> sorted(p.values().begin(), p.values().end());
  std::string out;
  for (const auto& [key, value] : sorted) {
    absl::StrAppend(&out, prefix, CsvCell(key), ",", ShortestDouble(value), "\n");
  }
  return out;
}

std::string RenderMetricsCsv(const std::vector<MetricRow>& rows) {
  const std::vector<std::string> columns = MetricValueColumns(rows);
  std::string out = MetricsCsvHeader(columns);
  for (const MetricRow& row : rows) out += MetricCsvRow(row, columns);
  return out;
}

std::vector<std::string> MetricKeysNotIn(
    const MetricRow& row, const std::vector<std::string>& value_columns) {
  std::vector<std::string> missing;
  for (const auto& [key, value] : row.point.values()) {
    if (!std::binary_search(value_columns.begin(), value_columns.end(), key)) {
      missing.push_back(key);
    }
  }
  std::sort(missing.begin(), missing.end());
  return missing;
}

std::string MetricToJson(const MetricRow& row) {
  const v1::MetricPoint& p = row.point;
  // Proto maps have no order; sort for stable output.
  std::map<std::string, double> values(p.values().begin(), p.values().end());
  std::string out = absl::StrCat(
      "{\"seq\":", row.seq, ",\"time_unix_ms\":", row.time_unix_ms,
      ",\"kind\":", JsonString(p.kind()), ",\"step\":", p.step(),
      ",\"epoch\":", p.epoch(), ",\"rank\":", p.rank(), ",\"values\":{");
  bool first = true;
  for (const auto& [key, value] : values) {
    absl::StrAppend(&out, first ? "" : ",", JsonString(key), ":",
                    JsonNumber(value));
    first = false;
  }
  out += "}}";
  return out;
}

}  // namespace trainctl::client
