#pragma once

// Classification metrics beyond accuracy, from per-class counts summed
// over every rank (so they are exact whatever the split), and the
// confusion matrix as text. Torch-free: the counting happens on the device
// in evaluation.cc, the arithmetic here.

#include <map>
#include <string>
#include <vector>

namespace trainctl::train {

// Per-class sums over the whole evaluation set, index = class id.
struct ClassCounts {
  std::vector<double> true_positives;  // predicted c and labelled c
  std::vector<double> predicted;       // predicted c
  std::vector<double> labelled;        // labelled c
};

// Adds eval_precision, eval_recall and eval_f1: macro averages over the
// classes that occur among the labels or the predictions (a class's score
// is 0 where its denominator is), as scikit-learn's average="macro" with
// zero_division=0. With per_class, also eval_precision_<c>, eval_recall_<c>
// and eval_f1_<c> for each such class c.
void AddClassificationMetrics(const ClassCounts& counts, bool per_class,
                              std::map<std::string, double>* metrics);

// The confusion matrix (`matrix[t * classes + p]`: samples labelled t and
// predicted p) as aligned text lines, a header first; rows are labels,
// columns predictions.
std::vector<std::string> ConfusionMatrixLines(const std::vector<double>& matrix,
                                              int classes);

}  // namespace trainctl::train
