#include "bench/control_plane/machine_trace.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace trainctl::bench {
namespace {

struct CpuTicks {
  uint64_t total = 0, idle = 0;
};

// The first line of /proc/stat: the machine's ticks by kind, all cores.
CpuTicks ReadCpuTicks() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  in >> cpu;
  CpuTicks t;
  uint64_t value = 0;
  for (int field = 0; field < 10 && in >> value; ++field) {
    t.total += value;
    if (field == 3 || field == 4) t.idle += value;  // idle, iowait
  }
  return t;
}

}  // namespace

std::string TraceMachineBusy(int slice_ms, int slices) {
  std::vector<int> digits;
  CpuTicks before = ReadCpuTicks();
  auto next = std::chrono::steady_clock::now();
  for (int i = 0; i < slices; ++i) {
    next += std::chrono::milliseconds(slice_ms);
    std::this_thread::sleep_until(next);
    const CpuTicks after = ReadCpuTicks();
    const uint64_t total = after.total - before.total;
    const uint64_t busy = total - (after.idle - before.idle);
    digits.push_back(total == 0 ? 0
                                : static_cast<int>(std::lround(9.0 * busy / total)));
    before = after;
  }
  std::ostringstream out;
  const int per_line = std::max(1, 1000 / slice_ms);
  for (size_t i = 0; i < digits.size(); ++i) {
    out << digits[i];
    if ((i + 1) % per_line == 0 || i + 1 == digits.size()) out << '\n';
  }
  return out.str();
}

}  // namespace trainctl::bench
