#pragma once

// `trainctl metrics`: the job's metric events as CSV or JSON lines. Pure.

#include <cstdint>
#include <string>
#include <vector>

#include "trainctl/v1/jobs.pb.h"

namespace trainctl::client {

// One metric event: its seq and its point. time_unix_ms is the point's
// time, or the event's when the point has none.
struct MetricRow {
  int64_t seq = 0;
  int64_t time_unix_ms = 0;
  v1::MetricPoint point;
};

MetricRow MetricRowFromEvent(const v1::JobEvent& event);

// The value columns for rows of different kinds: the sorted union of every
// row's value keys (train rows have loss/lr/..., eval rows eval_accuracy/eval_loss,
// checkpoint rows bytes/world_size). A row leaves the cells of keys it
// lacks empty, so one table holds every kind and `kind` tells them apart.
std::vector<std::string> MetricValueColumns(const std::vector<MetricRow>& rows);

// "seq,time_unix_ms,kind,step,epoch,rank,<value columns...>\n".
std::string MetricsCsvHeader(const std::vector<std::string>& value_columns);
// One newline-terminated CSV row; values in shortest round-trip form
// ("nan"/"inf" for non-finite ones); keys not among value_columns are left
// out (see MetricKeysNotIn).
std::string MetricCsvRow(const MetricRow& row,
                         const std::vector<std::string>& value_columns);
// Header plus every row, columns from MetricValueColumns(rows).
std::string RenderMetricsCsv(const std::vector<MetricRow>& rows);
// The row's value keys missing from value_columns, sorted.
std::vector<std::string> MetricKeysNotIn(
    const MetricRow& row, const std::vector<std::string>& value_columns);

// The long ("tidy") CSV: one row per value, so the columns never depend on
// which keys the job reports, and a follower started before the first
// point prints every key. Header "seq,time_unix_ms,kind,step,epoch,rank,
// metric,value\n"; a point's rows in key order.
std::string MetricsLongCsvHeader();
std::string MetricLongCsvRows(const MetricRow& row);

// One JSON object (no newline): {"seq":12,"time_unix_ms":..,"kind":"train",
// "step":40,"epoch":0,"rank":0,"values":{"loss":0.43,...}} with values
// sorted by key, numbers as JSON numbers, non-finite values as null.
std::string MetricToJson(const MetricRow& row);

// RFC 4180 cell: quoted when it holds a comma, quote or newline.
std::string CsvCell(const std::string& text);

}  // namespace trainctl::client
