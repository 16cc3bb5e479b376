// The agent's messages up the stream: queueing and flushing, the numbered
// reports (metrics, log lines) kept for re-sending after a reconnect, what
// a rank reports on its fd 3, and deleting checkpoints the catalog prunes.

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "common/atomic_file.h"
#include "common/log.h"
#include "worker/agent/agent.h"
#include "worker/agent/checkpoint_sweep.h"

namespace trainctl::agent {

void Agent::Send(v1::AgentMessage message) {
  std::lock_guard<std::mutex> lock(mu_);
  RankId id;
  bool report = false;
  if (message.has_metrics()) {
    const auto& m = message.metrics();
    id = {m.job_id(), m.generation(), m.point().rank()};
    report = true;
  } else if (message.has_log()) {
    const auto& l = message.log();
    id = {l.job_id(), l.generation(), l.line().rank()};
    report = true;
  } else if (message.has_checkpoint()) {  // only rank 0 writes them
    const auto& c = message.checkpoint();
    id = {c.job_id(), c.generation(), 0};
    report = true;
  }
  if (report) reports_.Number(id, &message);
  buffer_.push_back(std::move(message));
  if (static_cast<int>(buffer_.size()) > options_.max_buffered_messages) {
    buffer_.pop_front();
  }
  FlushBufferLocked();
}

void Agent::FlushBufferLocked() {
  if (stream_ == nullptr) return;
  std::lock_guard<std::mutex> write_lock(write_mu_);
  while (!buffer_.empty()) {
    const v1::AgentMessage& next = buffer_.front();
    if (!stream_->Write(next)) return;  // the session is ending
    if (next.has_rank_status() && !next.rank_status().running()) {
      const v1::RankStatus& exit = next.rank_status();
      reports_.ExitDelivered({exit.job_id(), exit.generation(), exit.rank()});
    }
    buffer_.pop_front();
  }
}

void Agent::ResumeReportsLocked(const v1::Registered& registered) {
  std::set<RankId> adopted;
  std::deque<v1::AgentMessage> rebuilt;
  for (const v1::RankCursor& cursor : registered.cursors()) {
    const RankId id{cursor.job_id(), cursor.generation(), cursor.rank()};
    adopted.insert(id);
    bool missing = false;
    std::vector<v1::AgentMessage> kept =
        reports_.After(id, cursor.last_seq(), &missing);
    if (missing) {
      TLOG_WARNING << "some reports after " << cursor.last_seq() << " of rank "
                   << cursor.rank() << " of " << cursor.job_id()
                   << " are no longer kept";
    }
    const size_t resent = kept.size();
    for (v1::AgentMessage& m : kept) rebuilt.push_back(std::move(m));
    if (resent > 0) {
      TLOG_INFO << "re-sending " << resent << " reports of rank "
                << cursor.rank() << " of " << cursor.job_id();
    }
  }
  // Checkpoint reports (and the rest) before the exits: a job's last exit
  // ends it, and rank 0's last checkpoint must be cataloged by then.
  for (v1::AgentMessage& m : buffer_) {
    const bool is_report = m.has_metrics() || m.has_log() || m.has_checkpoint();
    const bool is_exit = m.has_rank_status() && !m.rank_status().running();
    if (!is_report && !is_exit) rebuilt.push_back(std::move(m));
  }
  for (const v1::RankStatus& exit : recent_exits_) {
    if (adopted.count({exit.job_id(), exit.generation(), exit.rank()})) {
      v1::AgentMessage m;
      *m.mutable_rank_status() = exit;
      rebuilt.push_back(std::move(m));
    }
  }
  buffer_.swap(rebuilt);
  // Reports of ranks that are neither adopted nor running are of no use.
  std::set<RankId> keep = adopted;
  for (const auto& [id, proc] : ranks_) keep.insert(id);
  reports_.RetainOnly(keep);
}

void Agent::OnRankReport(const RankId& id, const v1::RankReport& report) {
  const auto& [job_id, generation, rank] = id;
  v1::AgentMessage m;
  switch (report.kind_case()) {
    case v1::RankReport::kMetric:
      m.mutable_metrics()->set_job_id(job_id);
      m.mutable_metrics()->set_generation(generation);
      *m.mutable_metrics()->mutable_point() = report.metric();
      m.mutable_metrics()->mutable_point()->set_rank(rank);
      break;
    case v1::RankReport::kCheckpoint:
      m.mutable_checkpoint()->set_job_id(job_id);
      m.mutable_checkpoint()->set_generation(generation);
      *m.mutable_checkpoint()->mutable_checkpoint() = report.checkpoint();
      break;
    case v1::RankReport::kProgress: {
      // The ids come from the agent, not from what the rank claims.
      v1::RankHeartbeat progress = report.progress();
      progress.set_job_id(job_id);
      progress.set_generation(generation);
      progress.set_rank(rank);
      std::lock_guard<std::mutex> lock(mu_);
      progress_[id] = std::move(progress);
      return;
    }
    default:
      return;
  }
  Send(std::move(m));
}

void Agent::DeleteCheckpoints(const v1::DeleteCheckpoints& request) {
  std::vector<std::string> paths(request.paths().begin(), request.paths().end());
  for (std::string& stale : StaleCheckpoints(request)) paths.push_back(std::move(stale));
  for (const std::string& path : paths) {
    if (!IsInsideDir(path, request.dir()) || path.size() < 5 ||
        path.substr(path.size() - 5) != ".ckpt") {
      TLOG_WARNING << "not deleting " << path << ": not a checkpoint inside "
                   << request.dir();
      continue;
    }
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      TLOG_WARNING << "cannot delete checkpoint " << path << ": "
                   << std::strerror(errno);
    }
  }
}

}  // namespace trainctl::agent
