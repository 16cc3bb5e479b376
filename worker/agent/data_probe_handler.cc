#include "worker/agent/data_probe_handler.h"

#include <string>

#include "absl/status/statusor.h"
#include "common/data_probe.h"
#include "common/data_shape_probe.h"
#include "common/utf8_sanitize.h"

namespace trainctl::agent {

v1::ProbeDataResult HandleProbeData(const v1::ProbeDataRequest& request,
                                    const DataProbeOptions& options) {
  v1::ProbeDataResult result;
  result.set_request_id(request.request_id());
  DataProbeLimits limits;
  limits.max_bytes_read = options.max_bytes_read;
  limits.deadline = absl::Now() + options.timeout;
  absl::StatusOr<DataSampleCounts> counts =
      ProbeDataSamples(request.data(), limits);
  if (!counts.ok()) {
    result.set_error(SanitizeUtf8(std::string(counts.status().message()),
                                  kMaxProbeErrorBytes));
    if (result.error().empty()) result.set_error("data: cannot be counted");
    return result;
  }
  result.set_train_samples(counts->train_samples);
  result.set_eval_samples(counts->eval_samples);
  const PlanData shape = ProbeSampleShape(request.data(), limits);
  for (int64_t d : shape.input_shape) result.add_input_shape(d);
  result.set_num_classes(shape.num_classes);
  result.set_vocab_size(shape.vocab_size);
  return result;
}

}  // namespace trainctl::agent
