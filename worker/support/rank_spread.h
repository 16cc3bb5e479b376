#pragma once

#include <map>
#include <string>
#include <vector>

namespace trainctl::train {

// How one value is spread over the ranks of a job.
struct Spread {
  double min = 0;
  double mean = 0;
  double max = 0;
  int max_rank = 0;  // the lowest rank that holds `max`
};

// The spread of column `column` of `rows`, where rows[r] holds rank r's
// values (RankCollectives::GatherScalars). Rows without that column, and
// NaN values, are left out; with none left every field is NaN (max_rank -1).
Spread SpreadOf(const std::vector<std::vector<double>>& rows, size_t column);

// Sets `key` to the mean, `key`_min and `key`_max.
void AddSpread(const std::string& key, const Spread& spread,
               std::map<std::string, double>* values);

}  // namespace trainctl::train
