#include "worker/agent/kept_reports.h"

namespace trainctl::agent {
namespace {

int64_t SeqOf(const v1::AgentMessage& m) {
  if (m.has_checkpoint()) return m.checkpoint().seq();
  return m.has_metrics() ? m.metrics().seq() : m.log().seq();
}

}  // namespace

void KeptReports::Number(const RankId& id, v1::AgentMessage* message) {
  Rank& rank = ranks_[id];
  const int64_t seq = rank.next_seq++;
  if (message->has_metrics()) {
    message->mutable_metrics()->set_seq(seq);
  } else if (message->has_checkpoint()) {
    message->mutable_checkpoint()->set_seq(seq);
  } else {
    message->mutable_log()->set_seq(seq);
  }
  rank.kept.push_back(*message);
  const size_t size = message->ByteSizeLong();
  rank.bytes += size;
  total_bytes_ += size;
  if (rank.kept.size() > max_per_rank_) DropOldest(rank);
  EnforceTotal();
}

void KeptReports::DropOldest(Rank& rank) {
  const size_t size = rank.kept.front().ByteSizeLong();
  rank.bytes -= size;
  total_bytes_ -= size;
  rank.kept.pop_front();
}

void KeptReports::EnforceTotal() {
  // The largest keeper pays: one chatty rank does not evict the others.
  while (total_bytes_ > max_total_bytes_) {
    Rank* largest = nullptr;
    for (auto& [id, rank] : ranks_) {
      if (!rank.kept.empty() && (largest == nullptr || rank.bytes > largest->bytes)) {
        largest = &rank;
      }
    }
    if (largest == nullptr) return;
    DropOldest(*largest);
  }
}

std::vector<v1::AgentMessage> KeptReports::After(const RankId& id,
                                                 int64_t last_seq,
                                                 bool* missing) const {
  std::vector<v1::AgentMessage> out;
  *missing = false;
  auto it = ranks_.find(id);
  if (it == ranks_.end()) return out;
  for (const v1::AgentMessage& m : it->second.kept) {
    const int64_t seq = SeqOf(m);
    if (seq <= last_seq) continue;
    if (out.empty() && seq > last_seq + 1) *missing = true;
    out.push_back(m);
  }
  if (out.empty() && it->second.next_seq > last_seq + 1) *missing = true;
  return out;
}

void KeptReports::ForgetDelivered() {
  for (const RankId& id : aged_) {
    auto it = ranks_.find(id);
    if (it == ranks_.end()) continue;
    total_bytes_ -= it->second.bytes;
    ranks_.erase(it);
  }
  aged_.swap(delivered_);
  delivered_.clear();
}

void KeptReports::RetainOnly(const std::set<RankId>& keep) {
  for (auto it = ranks_.begin(); it != ranks_.end();) {
    if (keep.count(it->first) == 0) {
      total_bytes_ -= it->second.bytes;
      it = ranks_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t KeptReports::count(const RankId& id) const {
  auto it = ranks_.find(id);
  return it == ranks_.end() ? 0 : it->second.kept.size();
}

}  // namespace trainctl::agent
