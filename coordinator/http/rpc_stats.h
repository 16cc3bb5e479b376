#pragma once

// Counts and times the coordinator's gRPC calls for /metrics. A gRPC server
// interceptor feeds it, so the service handlers stay thin and every service
// (including health and reflection) is covered the same way.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/support/server_interceptor.h>

#include "coordinator/http/prometheus_text.h"

namespace trainctl::coordinator::http {

class RpcStats {
 public:
  // Upper bounds (seconds) of the latency histogram's buckets.
  static const std::vector<double>& LatencyBounds();

  void Started(const std::string& method);
  // `seconds` is observed in the latency histogram only for unary calls: a
  // stream's lifetime (an agent connection, a watch) is not a latency.
  void Finished(const std::string& method, bool unary, int code,
                double seconds);

  // trainctl_rpc_requests_total, trainctl_rpc_in_flight and
  // trainctl_rpc_duration_seconds.
  void WriteTo(PrometheusText& out) const;

  // For ServerBuilder::experimental().SetInterceptorCreators.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
  InterceptorFactory();

 private:
  struct Method {
    std::map<int, uint64_t> finished_by_code;
    int64_t in_flight = 0;
    bool unary = false;
    std::vector<uint64_t> buckets;  // per LatencyBounds(), non-cumulative
    uint64_t overflow = 0;
    double sum_seconds = 0;
  };

  mutable std::mutex mu_;
  std::map<std::string, Method> methods_;  // GUARDED_BY(mu_)
};

// "OK", "NOT_FOUND", ... for a grpc::StatusCode value.
std::string GrpcCodeName(int code);

}  // namespace trainctl::coordinator::http
