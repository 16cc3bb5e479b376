#include <algorithm>

#include "common/grpc_status.h"
#include "coordinator/services.h"

namespace trainctl::coordinator {
namespace {

constexpr int64_t kDefaultWaitMs = 300'000;
constexpr int64_t kMaxWaitMs = 3'600'000;

Rendezvous::Scope ToScope(const v1::Scope& scope) {
  return {scope.job_id(), scope.generation()};
}

int64_t WaitMs(int64_t requested) {
  return requested <= 0 ? kDefaultWaitMs : std::min(requested, kMaxWaitMs);
}

grpc::Status CheckScope(const v1::Scope& scope) {
  if (scope.job_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "scope.job_id: must not be empty");
  }
  return grpc::Status::OK;
}

}  // namespace

grpc::Status RendezvousService::Admit(const grpc::ServerContext& ctx,
                                      const v1::Scope& scope) const {
  if (auto s = CheckScope(scope); !s.ok()) return s;
  return ToGrpcStatus(
      auth_.CheckRendezvous(ctx, scope.job_id(), scope.generation()));
}

grpc::Status RendezvousService::Set(grpc::ServerContext* ctx,
                                    const v1::SetRequest* req,
                                    v1::SetResponse*) {
  if (auto s = Admit(*ctx, req->scope()); !s.ok()) return s;
  return ToGrpcStatus(
      store_.Set(ToScope(req->scope()), req->key(), req->value()));
}

grpc::Status RendezvousService::Get(grpc::ServerContext* ctx,
                                    const v1::GetRequest* req,
                                    v1::GetResponse* resp) {
  if (auto s = Admit(*ctx, req->scope()); !s.ok()) return s;
  absl::StatusOr<std::string> value =
      store_.Get(ToScope(req->scope()), req->key(), WaitMs(req->timeout_ms()));
  if (!value.ok()) return ToGrpcStatus(value.status());
  resp->set_value(*std::move(value));
  return grpc::Status::OK;
}

grpc::Status RendezvousService::Add(grpc::ServerContext* ctx,
                                    const v1::AddRequest* req,
                                    v1::AddResponse* resp) {
  if (auto s = Admit(*ctx, req->scope()); !s.ok()) return s;
  absl::StatusOr<int64_t> sum =
      store_.Add(ToScope(req->scope()), req->key(), req->delta());
  if (!sum.ok()) return ToGrpcStatus(sum.status());
  resp->set_value(*sum);
  return grpc::Status::OK;
}

grpc::Status RendezvousService::CompareSet(grpc::ServerContext* ctx,
                                           const v1::CompareSetRequest* req,
                                           v1::CompareSetResponse* resp) {
  if (auto s = Admit(*ctx, req->scope()); !s.ok()) return s;
  absl::StatusOr<std::string> value = store_.CompareSet(
      ToScope(req->scope()), req->key(), req->expected(), req->desired());
  if (!value.ok()) return ToGrpcStatus(value.status());
  resp->set_value(*std::move(value));
  return grpc::Status::OK;
}

grpc::Status RendezvousService::Check(grpc::ServerContext* ctx,
                                      const v1::CheckRequest* req,
                                      v1::CheckResponse* resp) {
  if (auto s = Admit(*ctx, req->scope()); !s.ok()) return s;
  resp->set_all_present(store_.Check(
      ToScope(req->scope()), {req->keys().begin(), req->keys().end()}));
  return grpc::Status::OK;
}

grpc::Status RendezvousService::Wait(grpc::ServerContext* ctx,
                                     const v1::WaitRequest* req,
                                     v1::WaitResponse*) {
  if (auto s = Admit(*ctx, req->scope()); !s.ok()) return s;
  return ToGrpcStatus(store_.Wait(ToScope(req->scope()),
                                  {req->keys().begin(), req->keys().end()},
                                  WaitMs(req->timeout_ms())));
}

grpc::Status RendezvousService::Delete(grpc::ServerContext* ctx,
                                       const v1::DeleteRequest* req,
                                       v1::DeleteResponse* resp) {
  if (auto s = Admit(*ctx, req->scope()); !s.ok()) return s;
  resp->set_deleted(store_.Delete(ToScope(req->scope()), req->key()));
  return grpc::Status::OK;
}

grpc::Status RendezvousService::NumKeys(grpc::ServerContext* ctx,
                                        const v1::NumKeysRequest* req,
                                        v1::NumKeysResponse* resp) {
  if (auto s = Admit(*ctx, req->scope()); !s.ok()) return s;
  resp->set_count(store_.NumKeys(ToScope(req->scope())));
  return grpc::Status::OK;
}

grpc::Status RendezvousService::AwaitRegroup(grpc::ServerContext* ctx,
                                             const v1::AwaitRegroupRequest* req,
                                             v1::AwaitRegroupResponse* resp) {
  if (auto s = Admit(*ctx, req->scope()); !s.ok()) return s;
  absl::StatusOr<Rendezvous::RegroupPlace> place =
      store_.AwaitRegroup(ToScope(req->scope()), req->rank(), WaitMs(req->timeout_ms()));
  if (!place.ok()) return ToGrpcStatus(place.status());
  resp->set_generation(place->generation);
  resp->set_rank(place->rank);
  resp->set_world_size(place->world_size);
  resp->set_rendezvous_key(auth_.RendezvousKey(req->scope().job_id(), place->generation));
  return grpc::Status::OK;
}

}  // namespace trainctl::coordinator
