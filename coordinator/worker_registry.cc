#include "coordinator/worker_registry.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/utf8_sanitize.h"

namespace trainctl::coordinator {

absl::Status CheckSlots(const char* field, int64_t slots) {
  if (slots < 1 || slots > kMaxSlotsPerWorker) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be from 1 to ", kMaxSlotsPerWorker,
                     ", got ", slots));
  }
  return absl::OkStatus();
}

absl::Status WorkerRegistry::Register(const v1::RegisterRequest& info,
                                      std::shared_ptr<AgentLink> link,
                                      int64_t now_unix_ms) {
  if (info.name().empty()) {
    return absl::InvalidArgumentError("register.name: must not be empty");
  }
  // All are printed in `trainctl workers`, the dashboard and the logs.
  std::vector<std::pair<const char*, const std::string*>> shown = {
      {"register.name", &info.name()},
      {"register.collective_host", &info.collective_host()}};
  if (info.devices_size() > kMaxSlotsPerWorker + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "register.devices: ", info.devices_size(), " listed; at most ",
        kMaxSlotsPerWorker + 1, " (the CPU and a GPU per slot)"));
  }
  for (const std::string& device : info.devices()) {
    shown.emplace_back("register.devices", &device);
  }
  for (const auto& [field, pointer] : shown) {
    const std::string& value = *pointer;
    if (value.size() > kMaxWorkerStringBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": is ", value.size(), " bytes; at most ",
                       kMaxWorkerStringBytes, " are allowed"));
    }
    if (!IsValidUtf8(value) || HasControlCharacters(value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": must be UTF-8 without control characters"));
    }
  }
  if (absl::Status s = CheckSlots("register.slots", info.slots()); !s.ok()) {
    return s;
  }
  if (info.gpu_slots() < 0 || info.gpu_slots() > info.slots()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "register.gpu_slots: must be from 0 to the ", info.slots(),
        " slots, got ", info.gpu_slots()));
  }
  auto it = workers_.find(info.name());
  if (it != workers_.end()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "a worker named '", info.name(),
        "' is already connected; give each worker a unique --name"));
  }
  Worker& w = workers_[info.name()];
  w.info = info;
  w.link = std::move(link);
  w.last_heartbeat_ms = now_unix_ms;
  return absl::OkStatus();
}

std::set<WorkerRegistry::RankKey> WorkerRegistry::Remove(
    const std::string& name, const AgentLink* link) {
  auto it = workers_.find(name);
  if (it == workers_.end()) return {};
  if (link != nullptr && it->second.link.get() != link) return {};
  std::set<RankKey> ranks = std::move(it->second.ranks);
  workers_.erase(it);
  return ranks;
}

void WorkerRegistry::Heartbeat(const std::string& name, int64_t now_unix_ms) {
  auto it = workers_.find(name);
  if (it != workers_.end()) it->second.last_heartbeat_ms = now_unix_ms;
}

std::vector<std::string> WorkerRegistry::Expired(int64_t now) const {
  std::vector<std::string> out;
  for (const auto& [name, w] : workers_) {
    if (now - w.last_heartbeat_ms > lease_ms_) out.push_back(name);
  }
  return out;
}

void WorkerRegistry::Occupy(const std::string& name, const RankKey& key,
                            bool gpu_slot) {
  auto it = workers_.find(name);
  if (it == workers_.end()) return;
  it->second.ranks.insert(key);
  if (gpu_slot) it->second.on_gpu_slots.insert(key);
}

void WorkerRegistry::Release(const std::string& name, const RankKey& key) {
  auto it = workers_.find(name);
  if (it == workers_.end()) return;
  it->second.ranks.erase(key);
  it->second.on_gpu_slots.erase(key);
}

bool WorkerRegistry::Holds(const std::string& name, const RankKey& key) const {
  auto it = workers_.find(name);
  return it != workers_.end() && it->second.ranks.count(key) > 0;
}

const WorkerRegistry::Worker* WorkerRegistry::Find(
    const std::string& name) const {
  auto it = workers_.find(name);
  return it == workers_.end() ? nullptr : &it->second;
}

std::vector<WorkerSlots> WorkerRegistry::FreeSlots() const {
  std::vector<WorkerSlots> out;
  for (const auto& [name, w] : workers_) {
    const int free = w.info.slots() - static_cast<int>(w.ranks.size());
    const int free_gpu = std::min(
        free, w.info.gpu_slots() - static_cast<int>(w.on_gpu_slots.size()));
    out.push_back({name, free, w.info.slots(), std::max(0, free_gpu),
                   w.info.gpu_slots()});
  }
  return out;
}

std::vector<v1::WorkerInfo> WorkerRegistry::Describe() const {
  std::vector<v1::WorkerInfo> out;
  for (const auto& [name, w] : workers_) {
    v1::WorkerInfo info;
    info.set_name(name);
    info.set_host(w.info.collective_host());
    info.set_slots_total(w.info.slots());
    info.set_slots_free(w.info.slots() - static_cast<int>(w.ranks.size()));
    info.set_gpu_slots_total(w.info.gpu_slots());
    info.set_gpu_slots_free(std::max(
        0, std::min(info.slots_free(),
                    w.info.gpu_slots() - static_cast<int>(w.on_gpu_slots.size()))));
    for (const auto& d : w.info.devices()) info.add_devices(d);
    info.set_last_heartbeat_unix_ms(w.last_heartbeat_ms);
    for (const auto& r : w.ranks) {
      v1::RankRef* ref = info.add_ranks();
      ref->set_job_id(r.job_id);
      ref->set_generation(r.generation);
      ref->set_rank(r.rank);
    }
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace trainctl::coordinator
