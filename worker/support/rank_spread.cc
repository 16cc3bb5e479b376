#include "worker/support/rank_spread.h"

#include <cmath>
#include <limits>

namespace trainctl::train {

Spread SpreadOf(const std::vector<std::vector<double>>& rows, size_t column) {
  Spread spread;
  double sum = 0;
  int counted = 0;
  for (size_t rank = 0; rank < rows.size(); ++rank) {
    if (column >= rows[rank].size() || std::isnan(rows[rank][column])) continue;
    const double v = rows[rank][column];
    if (counted == 0 || v < spread.min) spread.min = v;
    if (counted == 0 || v > spread.max) {
      spread.max = v;
      spread.max_rank = static_cast<int>(rank);
    }
    sum += v;
    ++counted;
  }
  if (counted == 0) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    return {nan, nan, nan, -1};
  }
  spread.mean = sum / counted;
  return spread;
}

void AddSpread(const std::string& key, const Spread& spread,
               std::map<std::string, double>* values) {
  (*values)[key] = spread.mean;
  (*values)[key + "_min"] = spread.min;
  (*values)[key + "_max"] = spread.max;
}

}  // namespace trainctl::train
