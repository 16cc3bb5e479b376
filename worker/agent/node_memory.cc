#include "worker/agent/node_memory.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace trainctl::agent {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

int64_t MemoryBytesFrom(const std::string& meminfo, const std::string& cgroup_max) {
  int64_t total = 0;
  std::istringstream lines(meminfo);
  std::string line;
  while (std::getline(lines, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "MemTotal:")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    const bool kib = absl::ConsumeSuffix(&rest, "kB");
    int64_t value = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &value)) {
      total = kib ? value * 1024 : value;
    }
  }
  int64_t limit = 0;
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(cgroup_max), &limit) && limit > 0 &&
      (total == 0 || limit < total)) {
    total = limit;
  }
  return total;
}

int64_t GpuMemoryBytesFrom(const std::string& csv, const std::vector<std::string>& gpus) {
  int64_t smallest = 0;
  std::istringstream lines(csv);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> fields = absl::StrSplit(line, ',');
    if (fields.size() != 3) continue;
    for (std::string& f : fields) f = std::string(absl::StripAsciiWhitespace(f));
    int64_t mib = 0;
    if (!absl::SimpleAtoi(fields[2], &mib)) continue;
    for (const std::string& gpu : gpus) {
      if (gpu == fields[0] || gpu == fields[1]) {
        const int64_t bytes = mib << 20;
        if (smallest == 0 || bytes < smallest) smallest = bytes;
      }
    }
  }
  return smallest;
}

int64_t NodeMemoryBytes() {
  return MemoryBytesFrom(Slurp("/proc/meminfo"), Slurp("/sys/fs/cgroup/memory.max"));
}

int64_t NodeGpuMemoryBytes(const std::vector<std::string>& gpus) {
  if (gpus.empty()) return 0;
  FILE* pipe = popen(
      "nvidia-smi --query-gpu=index,uuid,memory.total --format=csv,noheader,nounits "
      "2>/dev/null",
      "r");
  if (pipe == nullptr) return 0;
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0 && out.size() < (1 << 20)) {
    out.append(buf, n);
  }
  pclose(pipe);
  return GpuMemoryBytesFrom(out, gpus);
}

}  // namespace trainctl::agent
