#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include "trainctl/v1/rendezvous.grpc.pb.h"
#include "worker/train/torch_compat.h"

namespace trainctl::train {

// c10d::Store backed by the coordinator's Rendezvous service, scoped to one
// job generation; every call carries the generation's rendezvous key (the
// coordinator refuses calls without it). c10d expects a failing store call to throw, so failures
// become c10::Error with the coordinator's message; the rank process turns
// them into a job failure at its boundary. Thread-safe (gRPC stubs are).
//
// The coordinator keeps the keys durable, so a call that finds it gone
// (UNAVAILABLE: a crash or restart) is made again once it is back, for up
// to kOutageMs beyond the call's own wait: set, get, wait, check,
// deleteKey and getNumKeys, which mean the same when repeated. add and
// compareSet are not repeated (the first try may have been applied).
class RendezvousStore : public c10d::Store {
 public:
  RendezvousStore(std::shared_ptr<v1::Rendezvous::StubInterface> stub,
                  std::string job_id, int generation, std::string key,
                  std::chrono::milliseconds timeout);

  // Another store sharing this one's connection, scope and key (c10d hands one to each
  // thread that needs its own).
  c10::intrusive_ptr<c10d::Store> clone() TRAINCTL_STORE_CLONE_OVERRIDE;
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(
      const std::string& key, const std::vector<uint8_t>& expected,
      const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  static constexpr int64_t kOutageMs = 60'000;
  using Deadline = std::chrono::system_clock::time_point;
  // A client context that ends at `deadline`.
  std::unique_ptr<grpc::ClientContext> Context(Deadline deadline) const;
  // Runs call(context, wait_ms) until it answers other than UNAVAILABLE or
  // wait_ms + kOutageMs have passed; wait_ms is what is left of the wait.
  grpc::Status Repeating(
      int64_t wait_ms,
      const std::function<grpc::Status(grpc::ClientContext*, int64_t)>& call) const;
  v1::Scope scope_;
  const std::string key_;
  std::shared_ptr<v1::Rendezvous::StubInterface> stub_;
};

// In-place recovery: where `rank` of the generation (admitted by its `key`)
// goes next, once the coordinator has decided (Rendezvous.AwaitRegroup),
// waiting at most `wait`. An error names why there is no place for it.
absl::StatusOr<v1::AwaitRegroupResponse> AwaitRegroup(
    v1::Rendezvous::StubInterface& stub, const std::string& job_id, int generation,
    int rank, const std::string& key, std::chrono::milliseconds wait);

}  // namespace trainctl::train
