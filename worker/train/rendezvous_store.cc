#include "worker/train/rendezvous_store.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <thread>

#include "common/grpc_status.h"

namespace trainctl::train {
namespace {

// Time the coordinator may take to answer beyond the wait it was asked for.
constexpr int64_t kRpcSlackMs = 10'000;

std::string ToString(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::vector<uint8_t> ToBytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

void Check(const grpc::Status& status, const char* op, const std::string& key) {
  TORCH_CHECK(status.ok(), "rendezvous ", op, " '", key,
              "' failed: ", status.error_message());
}

}  // namespace

RendezvousStore::RendezvousStore(
    std::shared_ptr<v1::Rendezvous::StubInterface> stub, std::string job_id,
    int generation, std::string key, std::chrono::milliseconds timeout)
    : c10d::Store(timeout), key_(std::move(key)), stub_(std::move(stub)) {
  scope_.set_job_id(std::move(job_id));
  scope_.set_generation(generation);
}

c10::intrusive_ptr<c10d::Store> RendezvousStore::clone() {
  return c10::make_intrusive<RendezvousStore>(stub_, scope_.job_id(),
                                              scope_.generation(), key_,
                                              getTimeout());
}

std::unique_ptr<grpc::ClientContext> RendezvousStore::Context(
    Deadline deadline) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(deadline);
  // Ranks often start before the coordinator answers, and a restarted one
  // takes a moment: wait for the channel.
  ctx->set_wait_for_ready(true);
  ctx->AddMetadata("x-trainctl-rendezvous-key", key_);
  return ctx;
}

grpc::Status RendezvousStore::Repeating(
    int64_t wait_ms,
    const std::function<grpc::Status(grpc::ClientContext*, int64_t)>& call) const {
  using std::chrono::milliseconds;
  using std::chrono::system_clock;
  const Deadline wait_end = system_clock::now() + milliseconds(wait_ms);
  const Deadline give_up = wait_end + milliseconds(kOutageMs);
  for (bool first = true;; first = false) {
    // The first try waits as long as asked; a repeat, what is left of it.
    const int64_t left =
        first ? wait_ms
              : std::max<int64_t>(0, std::chrono::duration_cast<milliseconds>(
                                         wait_end - system_clock::now())
                                         .count());
    grpc::Status status =
        call(Context(std::min(give_up, system_clock::now() +
                                           milliseconds(left + kRpcSlackMs)))
                 .get(),
             left);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE ||
        system_clock::now() + milliseconds(200) >= give_up) {
      return status;
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
}

void RendezvousStore::set(const std::string& key,
                          const std::vector<uint8_t>& value) {
  v1::SetRequest req;
  *req.mutable_scope() = scope_;
  req.set_key(key);
  req.set_value(ToString(value));
  v1::SetResponse resp;
  Check(Repeating(0,
                  [&](grpc::ClientContext* ctx, int64_t) {
                    return stub_->Set(ctx, req, &resp);
                  }),
        "set", key);
}

std::vector<uint8_t> RendezvousStore::compareSet(
    const std::string& key, const std::vector<uint8_t>& expected,
    const std::vector<uint8_t>& desired) {
  v1::CompareSetRequest req;
  *req.mutable_scope() = scope_;
  req.set_key(key);
  req.set_expected(ToString(expected));
  req.set_desired(ToString(desired));
  v1::CompareSetResponse resp;
  Check(stub_->CompareSet(Context(std::chrono::system_clock::now() +
                                  std::chrono::milliseconds(kRpcSlackMs))
                              .get(),
                          req, &resp),
        "compareSet", key);
  return ToBytes(resp.value());
}

std::vector<uint8_t> RendezvousStore::get(const std::string& key) {
  v1::GetRequest req;
  *req.mutable_scope() = scope_;
  req.set_key(key);
  v1::GetResponse resp;
  Check(Repeating(timeout_.count(),
                  [&](grpc::ClientContext* ctx, int64_t left) {
                    req.set_timeout_ms(left);
                    return stub_->Get(ctx, req, &resp);
                  }),
        "get", key);
  return ToBytes(resp.value());
}

int64_t RendezvousStore::add(const std::string& key, int64_t value) {
  v1::AddRequest req;
  *req.mutable_scope() = scope_;
  req.set_key(key);
  req.set_delta(value);
  v1::AddResponse resp;
  Check(stub_->Add(Context(std::chrono::system_clock::now() +
                           std::chrono::milliseconds(kRpcSlackMs))
                       .get(),
                   req, &resp),
        "add", key);
  return resp.value();
}

bool RendezvousStore::deleteKey(const std::string& key) {
  v1::DeleteRequest req;
  *req.mutable_scope() = scope_;
  req.set_key(key);
  v1::DeleteResponse resp;
  Check(Repeating(0,
                  [&](grpc::ClientContext* ctx, int64_t) {
                    return stub_->Delete(ctx, req, &resp);
                  }),
        "delete", key);
  return resp.deleted();
}

bool RendezvousStore::check(const std::vector<std::string>& keys) {
  v1::CheckRequest req;
  *req.mutable_scope() = scope_;
  for (const auto& k : keys) req.add_keys(k);
  v1::CheckResponse resp;
  Check(Repeating(0,
                  [&](grpc::ClientContext* ctx, int64_t) {
                    return stub_->Check(ctx, req, &resp);
                  }),
        "check", keys.empty() ? "" : keys.front());
  return resp.all_present();
}

int64_t RendezvousStore::getNumKeys() {
  v1::NumKeysRequest req;
  *req.mutable_scope() = scope_;
  v1::NumKeysResponse resp;
  Check(Repeating(0,
                  [&](grpc::ClientContext* ctx, int64_t) {
                    return stub_->NumKeys(ctx, req, &resp);
                  }),
        "numKeys", "");
  return resp.count();
}

void RendezvousStore::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void RendezvousStore::wait(const std::vector<std::string>& keys,
                           const std::chrono::milliseconds& timeout) {
  v1::WaitRequest req;
  *req.mutable_scope() = scope_;
  for (const auto& k : keys) req.add_keys(k);
  v1::WaitResponse resp;
  Check(Repeating(timeout.count(),
                  [&](grpc::ClientContext* ctx, int64_t left) {
                    req.set_timeout_ms(left);
                    return stub_->Wait(ctx, req, &resp);
                  }),
        "wait", keys.empty() ? "" : keys.front());
}

absl::StatusOr<v1::AwaitRegroupResponse> AwaitRegroup(
    v1::Rendezvous::StubInterface& stub, const std::string& job_id, int generation,
    int rank, const std::string& key, std::chrono::milliseconds wait) {
  v1::AwaitRegroupRequest request;
  request.mutable_scope()->set_job_id(job_id);
  request.mutable_scope()->set_generation(generation);
  request.set_rank(rank);
  request.set_timeout_ms(wait.count());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + wait +
                   std::chrono::milliseconds(kRpcSlackMs));
  ctx.set_wait_for_ready(true);
  ctx.AddMetadata("x-trainctl-rendezvous-key", key);
  v1::AwaitRegroupResponse response;
  const grpc::Status status = stub.AwaitRegroup(&ctx, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

}  // namespace trainctl::train
