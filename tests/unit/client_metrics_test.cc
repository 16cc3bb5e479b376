// CSV and JSON-lines rendering of metric events.

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "client/json_text.h"
#include "client/metrics_export.h"

namespace trainctl::client {
namespace {

MetricRow Row(int64_t seq, const std::string& kind, int64_t step,
              std::map<std::string, double> values, int32_t rank = 0) {
  v1::JobEvent e;
  e.set_seq(seq);
  e.set_time_unix_ms(1000 + seq);
  v1::MetricPoint* p = e.mutable_metric();
  p->set_kind(kind);
  p->set_step(step);
  p->set_epoch(1);
  p->set_rank(rank);
  for (const auto& [k, v] : values) (*p->mutable_values())[k] = v;
  return MetricRowFromEvent(e);
}

TEST(MetricsCsvTest, ColumnsAreFixedThenSortedUnionWithEmptyCells) {
  const std::vector<MetricRow> rows = {
      Row(3, "train", 8, {{"lr", 0.001}, {"loss", 0.5}}),
      Row(9, "eval", 16, {{"accuracy", 0.75}, {"loss", 0.25}}, 1),
      Row(12, "checkpoint", 16, {{"bytes", 1024}})};
  EXPECT_EQ(RenderMetricsCsv(rows),
            "seq,time_unix_ms,kind,step,epoch,rank,accuracy,bytes,loss,lr\n"
            "3,1003,train,8,1,0,,,0.5,0.001\n"
            "9,1009,eval,16,1,1,0.75,,0.25,\n"
            "12,1012,checkpoint,16,1,0,,1024,,\n");
}

TEST(MetricsCsvTest, PointTimeWinsOverEventTime) {
  v1::JobEvent e;
  e.set_seq(1);
  e.set_time_unix_ms(50);
  e.mutable_metric()->set_time_unix_ms(40);
  EXPECT_EQ(MetricRowFromEvent(e).time_unix_ms, 40);
}

TEST(MetricsCsvTest, RowUnderAFixedHeaderReportsKeysLeftOut) {
  const std::vector<std::string> columns = {"loss"};
  MetricRow row = Row(5, "eval", 1, {{"accuracy", 0.5}, {"loss", 1.5}});
  EXPECT_EQ(MetricCsvRow(row, columns), "5,1005,eval,1,1,0,1.5\n");
  EXPECT_EQ(MetricKeysNotIn(row, columns),
            std::vector<std::string>{"accuracy"});
}

TEST(MetricsCsvTest, QuotesCellsAndWritesNonFiniteValues) {
  EXPECT_EQ(CsvCell("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvCell("say \"x\""), "\"say \"\"x\"\"\"");
  EXPECT_EQ(CsvCell("plain"), "plain");
  MetricRow row = Row(1, "train", 1, {{"loss", NAN}, {"x", INFINITY}});
  EXPECT_EQ(MetricCsvRow(row, {"loss", "x"}), "1,1001,train,1,1,0,nan,inf\n");
}

TEST(MetricsLongCsvTest, OneRowPerValueInKeyOrder) {
  v1::JobEvent event;
  event.set_seq(7);
  event.set_time_unix_ms(1000);
  v1::MetricPoint* p = event.mutable_metric();
  p->set_kind("train");
  p->set_step(40);
  p->set_epoch(1);
  (*p->mutable_values())["lr"] = 0.002;
  (*p->mutable_values())["loss"] = 0.5;
  (*p->mutable_values())["odd,key"] = std::nan("");
  EXPECT_EQ(MetricsLongCsvHeader(), "seq,time_unix_ms,kind,step,epoch,rank,metric,value\n");
  EXPECT_EQ(MetricLongCsvRows(MetricRowFromEvent(event)),
            "7,1000,train,40,1,0,loss,0.5\n"
            "7,1000,train,40,1,0,lr,0.002\n"
            "7,1000,train,40,1,0,\"odd,key\",nan\n");
  // A point without values has no rows.
  p->clear_values();
  EXPECT_EQ(MetricLongCsvRows(MetricRowFromEvent(event)), "");
}

TEST(MetricsJsonTest, OneObjectWithSortedValues) {
  MetricRow row = Row(3, "train", 8, {{"samples_per_sec", 5230.5},
                                      {"loss", 0.1}, {"bad", NAN}});
  EXPECT_EQ(MetricToJson(row),
            "{\"seq\":3,\"time_unix_ms\":1003,\"kind\":\"train\",\"step\":8,"
            "\"epoch\":1,\"rank\":0,\"values\":{\"bad\":null,\"loss\":0.1,"
            "\"samples_per_sec\":5230.5}}");
}

TEST(JsonTextTest, ShortestRoundTrip) {
  EXPECT_EQ(ShortestDouble(0.1), "0.1");
  EXPECT_EQ(ShortestDouble(1e-5), "1e-05");
  EXPECT_EQ(ShortestDouble(3), "3");
  const double x = 0.123456789012345678;
  EXPECT_EQ(std::stod(ShortestDouble(x)), x);
  EXPECT_EQ(JsonNumber(-INFINITY), "null");
}

}  // namespace
}  // namespace trainctl::client
