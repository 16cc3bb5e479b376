#pragma once

// Per-rank rate limits on what ranks report (log lines, metric points), so a
// rank that prints in a tight loop cannot flood the event log, the database
// and every watcher. A token bucket per (job, rank, kind): `rate_per_s`
// sustained, `burst` at once. What is dropped is counted, and the count is
// handed out once with the next admitted report, to be said in the log.

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

namespace trainctl::coordinator {

class ReportLimiter {
 public:
  ReportLimiter(double rate_per_s, double burst)
      : rate_per_ms_(rate_per_s / 1000.0), burst_(burst) {}

  struct Decision {
    bool admit = false;
    int64_t dropped_before = 0;  // reports refused since the last admitted one
  };
  Decision Admit(const std::string& job_id, int rank, int64_t now_ms);
  // Forgets a job's buckets (it ended).
  void Forget(const std::string& job_id);

 private:
  struct Bucket {
    double tokens = 0;
    int64_t last_ms = 0;
    int64_t dropped = 0;
    bool fresh = true;
  };
  const double rate_per_ms_;
  const double burst_;
  std::map<std::tuple<std::string, int>, Bucket> buckets_;
};

}  // namespace trainctl::coordinator
