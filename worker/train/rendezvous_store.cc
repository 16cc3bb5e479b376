#include "worker/train/rendezvous_store.h"

#include <c10/util/Exception.h>

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
    int64_t wait_ms) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(wait_ms + kRpcSlackMs));
  // Ranks often start before the coordinator answers; wait for the channel.
  ctx->set_wait_for_ready(true);
  ctx->AddMetadata("x-trainctl-rendezvous-key", key_);
  return ctx;
}

void RendezvousStore::set(const std::string& key,
                          const std::vector<uint8_t>& value) {
  v1::SetRequest req;
  *req.mutable_scope() = scope_;
  req.set_key(key);
  req.set_value(ToString(value));
  v1::SetResponse resp;
  Check(stub_->Set(Context(0).get(), req, &resp), "set", key);
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
  Check(stub_->CompareSet(Context(0).get(), req, &resp), "compareSet", key);
  return ToBytes(resp.value());
}

std::vector<uint8_t> RendezvousStore::get(const std::string& key) {
  v1::GetRequest req;
  *req.mutable_scope() = scope_;
  req.set_key(key);
  req.set_timeout_ms(timeout_.count());
  v1::GetResponse resp;
  Check(stub_->Get(Context(timeout_.count()).get(), req, &resp), "get", key);
  return ToBytes(resp.value());
}

int64_t RendezvousStore::add(const std::string& key, int64_t value) {
  v1::AddRequest req;
  *req.mutable_scope() = scope_;
  req.set_key(key);
  req.set_delta(value);
  v1::AddResponse resp;
  Check(stub_->Add(Context(0).get(), req, &resp), "add", key);
  return resp.value();
}

bool RendezvousStore::deleteKey(const std::string& key) {
  v1::DeleteRequest req;
  *req.mutable_scope() = scope_;
  req.set_key(key);
  v1::DeleteResponse resp;
  Check(stub_->Delete(Context(0).get(), req, &resp), "delete", key);
  return resp.deleted();
}

bool RendezvousStore::check(const std::vector<std::string>& keys) {
  v1::CheckRequest req;
  *req.mutable_scope() = scope_;
  for (const auto& k : keys) req.add_keys(k);
  v1::CheckResponse resp;
  Check(stub_->Check(Context(0).get(), req, &resp), "check",
        keys.empty() ? "" : keys.front());
  return resp.all_present();
}

int64_t RendezvousStore::getNumKeys() {
  v1::NumKeysRequest req;
  *req.mutable_scope() = scope_;
  v1::NumKeysResponse resp;
  Check(stub_->NumKeys(Context(0).get(), req, &resp), "numKeys", "");
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
  req.set_timeout_ms(timeout.count());
  v1::WaitResponse resp;
  Check(stub_->Wait(Context(timeout.count()).get(), req, &resp), "wait",
        keys.empty() ? "" : keys.front());
}

}  // namespace trainctl::train
