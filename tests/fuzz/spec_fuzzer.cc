// libFuzzer target for ParseJobSpec (issue #7). Built with clang by
// tests/fuzz/CMakeLists.txt and run for a bounded time by the `spec_fuzz`
// test; see tests/fuzz/README.md to run it for longer.
//
// Besides "no crash, no hang, bounded memory" (libFuzzer's -timeout and
// -rss_limit_mb, with ASan and UBSan), it checks two properties:
// * a refusal is INVALID_ARGUMENT with a bounded message;
// * an accepted spec survives its JSON form (`--dry-run` prints it, and the
//   JSON is what users copy): parsing JobSpecToJson's output gives the same
//   spec.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/spec.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "spec_fuzzer: %s\n%s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<trainctl::v1::JobSpec> spec = trainctl::ParseJobSpec(text);
  if (!spec.ok()) {
    if (spec.status().code() != absl::StatusCode::kInvalidArgument) {
      Fail("refused with a code other than INVALID_ARGUMENT",
           spec.status().ToString());
    }
    if (spec.status().message().size() > 64 * 1024) {
      Fail("error message over 64 KiB",
           std::string(spec.status().message().substr(0, 1000)));
    }
    return 0;
  }
  const std::string json = trainctl::JobSpecToJson(*spec);
  absl::StatusOr<trainctl::v1::JobSpec> again = trainctl::ParseJobSpec(json);
  if (!again.ok())
    Fail("its own JSON is refused", again.status().ToString() + "\n" + json);
  if (again->SerializeAsString() != spec->SerializeAsString()) {
    Fail("its own JSON parses to another spec",
         json + "\n" + trainctl::JobSpecToJson(*again));
  }
  return 0;
}
