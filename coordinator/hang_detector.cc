#include "coordinator/hang_detector.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/vocabulary.h"

namespace trainctl::coordinator {
namespace {

auto Position(const v1::RankProgress& p) {
  return std::make_tuple(p.step(), p.collective_seq());
}

std::string Where(const v1::RankProgress& p) {
  if (ParseRankPhase(p.phase()) == RankPhase::kAllReduce) {
    return absl::StrCat("all-reduce #", p.collective_seq(), " at step ",
                        p.step());
  }
  return absl::StrCat(p.phase(), " at step ", p.step());
}

// The bound for where `p` is, and the spec field that sets it ("" for
// hang_timeout_s).
std::pair<int64_t, const char*> TimeoutFor(const v1::RankProgress& p,
                                           const HangTimeouts& t) {
  const RankPhase phase = ParseRankPhase(p.phase());
  if (phase == RankPhase::kEvaluation) return {t.eval_ms, "eval_timeout_s"};
  if (phase == RankPhase::kCheckpoint) return {t.checkpoint_ms, "checkpoint_timeout_s"};
  if (p.step() == t.first_step) return {t.first_step_ms, "first_step_timeout_s"};
  return {t.hang_ms, ""};
}

int64_t Ms(double seconds) { return static_cast<int64_t>(seconds * 1000); }

}  // namespace

HangTimeouts HangTimeouts::ForJob(const v1::Job& job) {
  const v1::FaultToleranceSpec& ft = job.spec().fault_tolerance();
  HangTimeouts t;
  t.hang_ms = Ms(ft.hang_timeout_s());
  const double phase_default = std::max(ft.hang_timeout_s(), 600.0);
  auto phase = [&](double seconds) {
    return Ms(seconds > 0 ? seconds : phase_default);
  };
  t.eval_ms = phase(ft.eval_timeout_s());
  t.checkpoint_ms = phase(ft.checkpoint_timeout_s());
  t.first_step_ms = phase(ft.first_step_timeout_s());
  t.first_step = job.resume_from().path().empty() ? 0 : job.resume_from().step();
  return t;
}

void RecordProgress(v1::Job& job, const v1::RankHeartbeat& beat,
                    int64_t now_ms) {
  for (v1::RankProgress& p : *job.mutable_progress()) {
    if (p.rank() != beat.rank()) continue;
    if (p.step() != beat.step() || p.collective_seq() != beat.collective_seq() ||
        p.phase() != beat.phase()) {
      p.set_step(beat.step());
      p.set_collective_seq(beat.collective_seq());
      p.set_phase(beat.phase());
      p.set_changed_unix_ms(now_ms);
    }
    p.set_reported_unix_ms(now_ms);
    return;
  }
  v1::RankProgress* p = job.add_progress();
  p->set_rank(beat.rank());
  p->set_step(beat.step());
  p->set_collective_seq(beat.collective_seq());
  p->set_phase(beat.phase());
  p->set_changed_unix_ms(now_ms);
  p->set_reported_unix_ms(now_ms);
}

std::optional<std::string> FindHang(const v1::Job& job, int64_t now_ms,
                                    const HangTimeouts& timeouts) {
  if (timeouts.hang_ms <= 0) return std::nullopt;
  const v1::RankProgress* stuck = nullptr;
  for (const v1::RankProgress& p : job.progress()) {
    if (ParseRankPhase(p.phase()) == RankPhase::kStarting) continue;
    if (now_ms - p.changed_unix_ms() < TimeoutFor(p, timeouts).first) continue;
    if (stuck == nullptr || Position(p) < Position(*stuck)) stuck = &p;
  }
  if (stuck == nullptr) return std::nullopt;
  // Name the rank furthest behind among all of them: a rank that hangs in
  // compute leaves the others blocked, and equally stale, one collective on.
  const v1::RankProgress* behind = stuck;
  for (const v1::RankProgress& p : job.progress()) {
    if (Position(p) < Position(*behind)) behind = &p;
  }
  // The others wait for it: while it is within its own phase's bound (an
  // evaluation, rank 0's checkpoint), waiting long is no hang.
  const auto [bound_ms, field] = TimeoutFor(*behind, timeouts);
  if (ParseRankPhase(behind->phase()) == RankPhase::kStarting ||
      now_ms - behind->changed_unix_ms() < bound_ms) {
    return std::nullopt;
  }
  std::string worker = "an unknown worker";
  if (behind->rank() >= 0 && behind->rank() < job.ranks_size()) {
    worker = absl::StrCat("worker ", job.ranks(behind->rank()).worker());
  }
  const int64_t stale_s = (now_ms - behind->changed_unix_ms()) / 1000;
  std::string out = absl::StrCat("rank ", behind->rank(), " on ", worker,
                                 " stuck in ", Where(*behind), " for ", stale_s,
                                 " s");
  if (*field != '\0') {
    absl::StrAppend(&out, " (over ", field, " ", bound_ms / 1000.0, ")");
  }
  if (behind->reported_unix_ms() > 0) {
    absl::StrAppend(&out, ", last report ",
                    (now_ms - behind->reported_unix_ms()) / 1000, " s ago");
  }
  std::vector<int> waiting;
  const v1::RankProgress* ahead = nullptr;
  for (const v1::RankProgress& p : job.progress()) {
    if (&p == behind || Position(p) == Position(*behind)) continue;
    waiting.push_back(p.rank());
    ahead = &p;
  }
  if (!waiting.empty()) {
    std::sort(waiting.begin(), waiting.end());
    absl::StrAppend(&out, " (rank", waiting.size() == 1 ? " " : "s ",
                    absl::StrJoin(waiting, ", "), waiting.size() == 1 ? " waits" : " wait",
                    " in ", Where(*ahead), ")");
  }
  return out;
}

}  // namespace trainctl::coordinator
