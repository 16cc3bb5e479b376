#include "coordinator/report_limiter.h"

#include <algorithm>

namespace trainctl::coordinator {

ReportLimiter::Decision ReportLimiter::Admit(const std::string& job_id,
                                             int rank, int64_t now_ms) {
  Bucket& b = buckets_[{job_id, rank}];
  if (b.fresh) {
    b.fresh = false;
    b.tokens = burst_;
    b.last_ms = now_ms;
  }
  if (now_ms > b.last_ms) {
    b.tokens = std::min(burst_, b.tokens + (now_ms - b.last_ms) * rate_per_ms_);
    b.last_ms = now_ms;
  }
  Decision d;
  if (b.tokens < 1.0) {
    ++b.dropped;
    return d;
  }
  b.tokens -= 1.0;
  d.admit = true;
  d.dropped_before = b.dropped;
  b.dropped = 0;
  return d;
}

void ReportLimiter::Forget(const std::string& job_id) {
  auto it = buckets_.lower_bound({job_id, -1});
  while (it != buckets_.end() && std::get<0>(it->first) == job_id) {
    it = buckets_.erase(it);
  }
}

}  // namespace trainctl::coordinator
