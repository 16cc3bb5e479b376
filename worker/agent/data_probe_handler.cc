#include "worker/agent/data_probe_handler.h"

#include <string>

#include "absl/status/statusor.h"
#include "common/data_probe.h"

namespace trainctl::agent {
namespace {

// The length of the valid UTF-8 sequence at text[i], or 0 if it is not one.
size_t Utf8SequenceLength(const std::string& text, size_t i) {
  const auto byte = [&](size_t k) {
    return static_cast<unsigned char>(text[k]);
  };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char min_second = 0x80, max_second = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) min_second = 0xa0;  // no overlong forms
    if (lead == 0xed) max_second = 0x9f;  // no surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) min_second = 0x90;
    if (lead == 0xf4) max_second = 0x8f;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < min_second || byte(i + 1) > max_second) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  }
  return length;
}

}  // namespace

std::string ValidUtf8Prefix(const std::string& text, size_t max_bytes) {
  static constexpr char kReplacement[] = "\xef\xbf\xbd";  // U+FFFD
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t length = Utf8SequenceLength(text, i);
    const size_t written = length == 0 ? 3 : length;
    if (out.size() + written > max_bytes) break;
    if (length == 0) {
      out.append(kReplacement, 3);
      i += 1;
    } else {
      out.append(text, i, length);
      i += length;
    }
  }
  return out;
}

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
    result.set_error(ValidUtf8Prefix(std::string(counts.status().message()),
                                     kMaxProbeErrorBytes));
    if (result.error().empty()) result.set_error("data: cannot be counted");
    return result;
  }
  result.set_train_samples(counts->train_samples);
  result.set_eval_samples(counts->eval_samples);
  return result;
}

}  // namespace trainctl::agent
