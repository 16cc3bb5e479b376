#include "coordinator/http/rpc_stats.h"

#include <algorithm>
#include <chrono>

namespace trainctl::coordinator::http {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::ServerRpcInfo;

// One per call: created when the call starts, destroyed when it ends.
class StatsInterceptor : public grpc::experimental::Interceptor {
 public:
  StatsInterceptor(ServerRpcInfo* info, RpcStats* stats)
      : stats_(stats),
        method_(info->method() != nullptr ? info->method() : "unknown"),
        unary_(info->type() == ServerRpcInfo::Type::UNARY),
        start_(std::chrono::steady_clock::now()) {
    stats_->Started(method_);
  }
  ~StatsInterceptor() override {
    // A call that ends without sending a status (the client went away or
    // the server shut down) counts as CANCELLED.
    stats_->Finished(method_, unary_, code_,
                     std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start_)
                         .count());
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      code_ = methods->GetSendStatus().error_code();
    }
    methods->Proceed();
  }

 private:
  RpcStats* stats_;
  const std::string method_;
  const bool unary_;
  const std::chrono::steady_clock::time_point start_;
  int code_ = grpc::StatusCode::CANCELLED;
};

class StatsInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit StatsInterceptorFactory(RpcStats* stats) : stats_(stats) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      ServerRpcInfo* info) override {
    return new StatsInterceptor(info, stats_);
  }

 private:
  RpcStats* stats_;
};

}  // namespace

std::string GrpcCodeName(int code) {
  static const char* const kNames[] = {
      "OK",          "CANCELLED",         "UNKNOWN",
      "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
      "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION", "ABORTED",   "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",        "UNAVAILABLE",
      "DATA_LOSS",   "UNAUTHENTICATED"};
  if (code >= 0 && code < static_cast<int>(std::size(kNames))) {
    return kNames[code];
  }
  return "UNKNOWN";
}

const std::vector<double>& RpcStats::LatencyBounds() {
  // 1 ms .. 10 s: rendezvous gets block for seconds, GetJob takes < 1 ms.
  static const std::vector<double> kBounds = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  return kBounds;
}

void RpcStats::Started(const std::string& method) {
  std::lock_guard<std::mutex> lock(mu_);
  ++methods_[method].in_flight;
}

void RpcStats::Finished(const std::string& method, bool unary, int code,
                        double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  Method& m = methods_[method];
  --m.in_flight;
  ++m.finished_by_code[code];
  m.unary = unary;
  if (!unary) return;
  const auto& bounds = LatencyBounds();
  m.buckets.resize(bounds.size());
  const size_t i =
      std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin();
  if (i < bounds.size()) {
    ++m.buckets[i];
  } else {
    ++m.overflow;
  }
  m.sum_seconds += seconds;
}

void RpcStats::WriteTo(PrometheusText& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  out.Family("trainctl_rpc_requests_total", "counter",
             "gRPC calls the coordinator finished, by method and status code.");
  for (const auto& [method, m] : methods_) {
    for (const auto& [code, count] : m.finished_by_code) {
      out.Sample({{"method", method}, {"code", GrpcCodeName(code)}},
                 static_cast<double>(count));
    }
  }
  out.Family("trainctl_rpc_in_flight", "gauge",
             "gRPC calls in progress, by method (open streams included).");
  for (const auto& [method, m] : methods_) {
    out.Sample({{"method", method}}, static_cast<double>(m.in_flight));
  }
  out.Family("trainctl_rpc_duration_seconds", "histogram",
             "Latency of finished unary gRPC calls, by method.");
  for (const auto& [method, m] : methods_) {
    if (!m.unary) continue;
    out.Histogram({{"method", method}}, LatencyBounds(), m.buckets, m.overflow,
                  m.sum_seconds);
  }
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
RpcStats::InterceptorFactory() {
  return std::make_unique<StatsInterceptorFactory>(this);
}

}  // namespace trainctl::coordinator::http
