// Precision, recall and F1 from per-class counts (scikit-learn's macro
// average with zero_division=0), and the confusion matrix's text.

#include "worker/support/eval_metrics.h"

#include <gtest/gtest.h>

namespace trainctl::train {
namespace {

// labels 0 0 1 1 2, predictions 0 1 1 1 0; class 3 occurs in neither.
ClassCounts Example() {
  ClassCounts counts;
  counts.true_positives = {1, 2, 0, 0};
  counts.predicted = {2, 3, 0, 0};
  counts.labelled = {2, 2, 1, 0};
  return counts;
}

TEST(EvalMetricsTest, MacroAveragesOverTheClassesThatOccur) {
  std::map<std::string, double> metrics;
  AddClassificationMetrics(Example(), /*per_class=*/false, &metrics);
  // sklearn.metrics.precision_recall_fscore_support(y, p, average="macro",
  // zero_division=0) on these gives the same three numbers.
  EXPECT_NEAR(metrics.at("eval_precision"), (0.5 + 2.0 / 3 + 0) / 3, 1e-12);
  EXPECT_NEAR(metrics.at("eval_recall"), (0.5 + 1 + 0) / 3, 1e-12);
  EXPECT_NEAR(metrics.at("eval_f1"), (0.5 + 0.8 + 0) / 3, 1e-12);
  EXPECT_EQ(metrics.count("eval_f1_0"), 0u);  // per class only when asked
}

TEST(EvalMetricsTest, PerClassScoresForEveryClassThatOccurs) {
  std::map<std::string, double> metrics;
  AddClassificationMetrics(Example(), /*per_class=*/true, &metrics);
  EXPECT_DOUBLE_EQ(metrics.at("eval_precision_1"), 2.0 / 3);
  EXPECT_DOUBLE_EQ(metrics.at("eval_recall_1"), 1.0);
  EXPECT_DOUBLE_EQ(metrics.at("eval_f1_1"), 0.8);
  // Labelled but never predicted: 0, not a division by zero.
  EXPECT_EQ(metrics.at("eval_precision_2"), 0.0);
  EXPECT_EQ(metrics.at("eval_f1_2"), 0.0);
  EXPECT_EQ(metrics.count("eval_f1_3"), 0u);  // in neither
}

TEST(EvalMetricsTest, NoSamplesGiveNoScores) {
  std::map<std::string, double> metrics;
  ClassCounts empty;
  empty.true_positives = empty.predicted = empty.labelled = {0, 0};
  AddClassificationMetrics(empty, true, &metrics);
  EXPECT_TRUE(metrics.empty());
}

TEST(EvalMetricsTest, ConfusionMatrixRowsAreLabelsColumnsPredictions) {
  const std::vector<std::string> lines =
      ConfusionMatrixLines({3, 1, 0, 12}, 2);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "label\\predicted  0  1");
  EXPECT_EQ(lines[1], "              0  3  1");
  EXPECT_EQ(lines[2], "              1  0 12");
}

}  // namespace
}  // namespace trainctl::train
