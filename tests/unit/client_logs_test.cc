// Folding of identical log lines across ranks, and --since parsing.

#include <gtest/gtest.h>

#include "client/log_fold.h"

namespace trainctl::client {
namespace {

LogEntry Line(int64_t seq, int32_t rank, int64_t ms, const std::string& text,
              const std::string& stream = "stdout") {
  LogEntry e;
  e.seq = seq;
  e.line.set_rank(rank);
  e.line.set_time_unix_ms(ms);
  e.line.set_text(text);
  e.line.set_stream(stream);
  return e;
}

std::vector<std::string> Rendered(const std::vector<FoldedLog>& lines) {
  std::vector<std::string> out;
  for (const FoldedLog& l : lines) out.push_back(RenderFoldedLog(l));
  return out;
}

TEST(FoldLogLinesTest, SameLineFromEightRanksInOneSecondIsOneLine) {
  std::vector<LogEntry> lines;
  // Arrival order is not rank order.
  for (int r : {3, 0, 7, 1, 2, 6, 5, 4}) {
    lines.push_back(Line(10 + r, r, 5000 + r * 10, "loading data\n"));
  }
  std::vector<FoldedLog> folded = FoldLogLines(lines);
  ASSERT_EQ(folded.size(), 1u);
  EXPECT_EQ(RenderFoldedLog(folded[0]), "[ranks 0-7] loading data");
  EXPECT_EQ(folded[0].seq, 13);  // the first line folded in (rank 3)
  EXPECT_EQ(folded[0].time_unix_ms, 5030);
}

TEST(FoldLogLinesTest, DifferentSecondsTextsAndStreamsStayApart) {
  std::vector<FoldedLog> folded = FoldLogLines({
      Line(1, 0, 1000, "a"), Line(2, 1, 1999, "a"), Line(3, 2, 1500, "b"),
      Line(4, 3, 1500, "a", "stderr"),
      Line(5, 2, 2000, "a"),  // next second: not folded with the first
  });
  EXPECT_EQ(Rendered(folded),
            (std::vector<std::string>{"[ranks 0-1] a", "[rank 2] b",
                                      "[rank 3] a", "[rank 2] a"}));
  EXPECT_EQ(folded[2].stream, "stderr");
}

TEST(FoldLogLinesTest, ARankRepeatingALineKeepsBothLines) {
  std::vector<FoldedLog> folded = FoldLogLines({
      Line(1, 0, 1000, "tick"), Line(2, 1, 1000, "tick"),
      Line(3, 0, 1100, "tick"), Line(4, 1, 1200, "tick"),
      Line(5, 2, 1300, "tick")});
  EXPECT_EQ(Rendered(folded),
            (std::vector<std::string>{"[ranks 0-2] tick", "[ranks 0-1] tick"}));
}

TEST(FoldLogLinesTest, OutOfOrderSecondStartsANewGroup) {
  // A line stamped earlier than the group before it (clock skew between
  // nodes) is not merged back into an already released second.
  std::vector<FoldedLog> folded =
      FoldLogLines({Line(1, 0, 1000, "x"), Line(2, 1, 2000, "y"),
                    Line(3, 2, 1000, "x")});
  EXPECT_EQ(Rendered(folded), (std::vector<std::string>{
                                  "[rank 0] x", "[rank 1] y", "[rank 2] x"}));
}

TEST(LogFolderTest, ReleasesASecondOnlyWhenALaterOneIsSeen) {
  LogFolder folder;
  EXPECT_TRUE(folder.Add(Line(1, 0, 1000, "a")).empty());
  EXPECT_TRUE(folder.Add(Line(2, 1, 1900, "a")).empty());
  EXPECT_TRUE(folder.Advance(1950).empty());  // same second: still open
  std::vector<FoldedLog> out = folder.Advance(2001);
  EXPECT_EQ(Rendered(out), (std::vector<std::string>{"[ranks 0-1] a"}));
  EXPECT_TRUE(folder.Flush().empty());
  folder.Add(Line(3, 0, 3000, "b"));
  EXPECT_EQ(Rendered(folder.Add(Line(4, 0, 4000, "c"))),
            (std::vector<std::string>{"[rank 0] b"}));
  EXPECT_EQ(Rendered(folder.Flush()), (std::vector<std::string>{"[rank 0] c"}));
}

TEST(FormatRankSetTest, Ranges) {
  EXPECT_EQ(FormatRankSet({3}), "3");
  EXPECT_EQ(FormatRankSet({0, 1, 2, 3, 5, 8, 9}), "0-3,5,8-9");
  EXPECT_EQ(FormatRankSet({}), "");
}

TEST(FoldedLogToJsonTest, EscapesText) {
  FoldedLog line;
  line.seq = 7;
  line.time_unix_ms = 1234;
  line.stream = "stderr";
  line.text = "say \"hi\"\\\t\x01";
  line.ranks = {0, 2};
  EXPECT_EQ(FoldedLogToJson(line),
            "{\"seq\":7,\"time_unix_ms\":1234,\"ranks\":[0,2],\"stream\":"
            "\"stderr\",\"text\":\"say \\\"hi\\\"\\\\\\t\\u0001\"}");
}

TEST(ParseSinceTest, DurationsAndTimestamps) {
  const absl::Time now = absl::FromUnixSeconds(1'000'000);
  EXPECT_EQ(*ParseSince("90s", now), (1'000'000 - 90) * 1000);
  EXPECT_EQ(*ParseSince("1h30m", now), (1'000'000 - 5400) * 1000);
  EXPECT_EQ(*ParseSince("1970-01-01T00:01:00Z", now), 60'000);
  EXPECT_EQ(*ParseSince("1970-01-01T01:01:00+01:00", now), 60'000);
  EXPECT_FALSE(ParseSince("yesterday", now).ok());
  EXPECT_FALSE(ParseSince("-5m", now).ok());
  EXPECT_FALSE(ParseSince("", now).ok());
}

}  // namespace
}  // namespace trainctl::client
