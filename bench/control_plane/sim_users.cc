#include "bench/control_plane/sim_users.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/control_plane/sim_agent.h"

namespace trainctl::bench {
namespace {

// A job the coordinator validates and queues like any other; the simulated
// ranks never open its data.
std::string BenchSpec(int ranks) {
  return absl::StrCat(
      "name: control-plane-bench\n"
      "ranks: ", ranks, "\n"
      "model: {type: mlp, hidden: [16]}\n"
      "data:\n"
      "  format: idx\n"
      "  train_images: /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz\n"
      "  train_labels: /usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz\n"
      "optimizer: {type: sgd, lr: 0.1}\n"
      "training: {epochs: 1, batch_size: ", ranks * 8, "}\n");
}

double MillisSince(int64_t start_us) {
  return static_cast<double>(SteadyMicros() - start_us) / 1000.0;
}

}  // namespace

JobSubmitter::JobSubmitter(std::shared_ptr<grpc::Channel> channel, int target,
                           int ranks)
    : stub_(v1::Jobs::NewStub(channel)), target_(target), spec_(BenchSpec(ranks)) {}

JobSubmitter::~JobSubmitter() { Stop(); }

void JobSubmitter::Start() { thread_ = std::thread([this] { Run(); }); }

void JobSubmitter::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void JobSubmitter::Pause(bool paused) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = paused;
  }
  changed_.notify_all();
}

void JobSubmitter::JobDone(const std::string& job_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_.erase(std::remove(active_.begin(), active_.end(), job_id),
                  active_.end());
  }
  changed_.notify_all();
}

std::string JobSubmitter::PickJob() {
  std::lock_guard<std::mutex> lock(mu_);
  if (active_.empty()) return "";
  return active_[next_pick_++ % active_.size()];
}

int JobSubmitter::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(active_.size());
}

void JobSubmitter::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (paused_ || static_cast<int>(active_.size()) >= target_) {
      changed_.wait(lock);
      continue;
    }
    lock.unlock();
    v1::SubmitJobRequest req;
    req.set_spec_text(spec_);
    v1::SubmitJobResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const int64_t start = SteadyMicros();
    const grpc::Status s = stub_->SubmitJob(&ctx, req, &resp);
    const double ms = MillisSince(start);
    lock.lock();
    if (!s.ok()) {
      ++refused_;
      // Back off a little: a refusal is a finding, not a reason to spin.
      changed_.wait_for(lock, std::chrono::milliseconds(200));
      continue;
    }
    if (recording_) latency_.Add(ms);
    ++submitted_;
    active_.push_back(resp.job().id());
  }
}

Watchers::Watchers(std::vector<std::shared_ptr<grpc::Channel>> channels,
                   JobSubmitter* jobs)
    : channels_(std::move(channels)), jobs_(jobs) {}

Watchers::~Watchers() { Stop(); }

void Watchers::Start() {
  stopping_ = false;
  for (size_t i = 0; i < channels_.size(); ++i) {
    threads_.emplace_back([this, i] { Run(static_cast<int>(i)); });
  }
}

void Watchers::Stop() {
  stopping_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (grpc::ClientContext* ctx : open_) ctx->TryCancel();
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void Watchers::Run(int index) {
  const std::unique_ptr<v1::Jobs::Stub> stub = v1::Jobs::NewStub(channels_[index]);
  while (!stopping_) {
    const std::string job = jobs_->PickJob();
    if (job.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    grpc::ClientContext ctx;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      open_.insert(&ctx);
    }
    v1::WatchJobRequest req;
    req.set_job_id(job);  // from the start, as `trainctl watch` replays
    const int64_t opened_us = SteadyMicros();
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader =
        stub->WatchJob(&ctx, req);
    v1::JobEvent event;
    while (reader->Read(&event)) {
      ++events_;
      int64_t sent_us = 0;
      if (event.has_metric()) {
        auto it = event.metric().values().find("bench_sent_us");
        if (it != event.metric().values().end()) {
          sent_us = static_cast<int64_t>(it->second);
        }
      } else if (event.has_log()) {
        const std::string& text = event.log().text();
        const size_t at = text.rfind("bench_sent_us=");
        if (at != std::string::npos) {
          (void)absl::SimpleAtoi(text.substr(at + 14), &sent_us);
        }
      }
      // The replay of what happened before the watch opened is not a
      // delivery latency.
      if (recording_ && sent_us >= opened_us) {
        delivery_.Add(static_cast<double>(SteadyMicros() - sent_us) / 1000.0);
      }
    }
    const grpc::Status s = reader->Finish();
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_.erase(&ctx);
    }
    if (!s.ok() && !stopping_) {
      if (++failed_ <= 3) {  // a failed watch is a finding: say what it was
        fprintf(stderr, "watch of %s failed: code %d: %s\n", job.c_str(),
                static_cast<int>(s.error_code()), s.error_message().c_str());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

}  // namespace trainctl::bench
