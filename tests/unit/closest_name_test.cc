#include "common/closest_name.h"

#include <gtest/gtest.h>

namespace trainctl {
namespace {

const std::vector<std::string> kCommands = {"submit", "list", "status", "watch",
                                            "logs",   "cancel", "workers", "metrics"};

TEST(ClosestNameTest, TyposFindTheirWord) {
  EXPECT_EQ(ClosestName("stauts", kCommands), "status");   // neighbours swapped
  EXPECT_EQ(ClosestName("sumbit", kCommands), "submit");
  EXPECT_EQ(ClosestName("lst", kCommands), "list");        // one dropped
  EXPECT_EQ(ClosestName("wrokers", kCommands), "workers");
  EXPECT_EQ(ClosestName("metrix", kCommands), "metrics");  // two edits, long word
  EXPECT_EQ(ClosestName("status", kCommands), "status");
}

TEST(ClosestNameTest, FarWordsAndShortWordsFindNothing) {
  EXPECT_EQ(ClosestName("frobnicate", kCommands), "");
  EXPECT_EQ(ClosestName("lx", kCommands), "");    // short: one edit only
  EXPECT_EQ(ClosestName("lgos", kCommands), "logs");
  EXPECT_EQ(ClosestName("", kCommands), "");
  EXPECT_EQ(ClosestName("status", {}), "");
  EXPECT_EQ(ClosestName(std::string(200, 's'), kCommands), "");
}

}  // namespace
}  // namespace trainctl
