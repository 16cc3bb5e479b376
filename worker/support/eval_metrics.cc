#include "worker/support/eval_metrics.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace trainctl::train {

void AddClassificationMetrics(const ClassCounts& counts, bool per_class,
                              std::map<std::string, double>* metrics) {
  const size_t classes = counts.true_positives.size();
  double precision_sum = 0, recall_sum = 0, f1_sum = 0;
  int present = 0;
  for (size_t c = 0; c < classes; ++c) {
    const double tp = counts.true_positives[c];
    const double predicted = counts.predicted[c];
    const double labelled = counts.labelled[c];
    if (predicted == 0 && labelled == 0) continue;  // not in this data
    ++present;
    const double precision = predicted > 0 ? tp / predicted : 0;
    const double recall = labelled > 0 ? tp / labelled : 0;
    const double f1 = precision + recall > 0
                          ? 2 * precision * recall / (precision + recall)
                          : 0;
    precision_sum += precision;
    recall_sum += recall;
    f1_sum += f1;
    if (per_class) {
      (*metrics)[absl::StrCat("eval_precision_", c)] = precision;
      (*metrics)[absl::StrCat("eval_recall_", c)] = recall;
      (*metrics)[absl::StrCat("eval_f1_", c)] = f1;
    }
  }
  if (present == 0) return;
  (*metrics)["eval_precision"] = precision_sum / present;
  (*metrics)["eval_recall"] = recall_sum / present;
  (*metrics)["eval_f1"] = f1_sum / present;
}

std::vector<std::string> ConfusionMatrixLines(const std::vector<double>& matrix,
                                              int classes) {
  std::vector<std::string> cells;
  size_t width = absl::StrCat(classes - 1).size();
  for (double v : matrix) {
    cells.push_back(absl::StrCat(static_cast<int64_t>(v)));
    width = std::max(width, cells.back().size());
  }
  auto pad = [width](const std::string& s) {
    return std::string(width + 1 - s.size(), ' ') + s;
  };
  std::vector<std::string> lines;
  std::string header = "label\\predicted";
  const size_t label_width = header.size();
  for (int p = 0; p < classes; ++p) header += pad(absl::StrCat(p));
  lines.push_back(header);
  for (int t = 0; t < classes; ++t) {
    std::string row = absl::StrCat(t);
    row = std::string(label_width - row.size(), ' ') + row;
    for (int p = 0; p < classes; ++p) row += pad(cells[t * classes + p]);
    lines.push_back(row);
  }
  return lines;
}

}  // namespace trainctl::train
