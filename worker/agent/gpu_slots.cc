#include "worker/agent/gpu_slots.h"

#include <unistd.h>

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace trainctl::agent {
namespace {

// The most GPUs one node may list (beyond any machine's).
constexpr size_t kMaxGpus = 64;

absl::StatusOr<std::vector<std::string>> ParseList(const std::string& what,
                                                   const std::string& list) {
  std::vector<std::string> gpus;
  std::set<std::string> seen;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    const std::string id(absl::StripAsciiWhitespace(part));
    const bool ok = !id.empty() && id.size() <= 64 &&
                    std::all_of(id.begin(), id.end(), [](char c) {
                      return absl::ascii_isalnum(c) || c == '-' || c == ':';
                    });
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": '", id.size() <= 64 ? id : id.substr(0, 64),
          "' is not a GPU id (a CUDA device number or a GPU UUID)"));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": GPU ", id, " is listed twice"));
    }
    gpus.push_back(id);
  }
  if (gpus.size() > kMaxGpus) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": more than ", kMaxGpus, " GPUs"));
  }
  return gpus;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseGpus(const std::string& flag,
                                                   const char* visible,
                                                   const std::string& dev) {
  if (flag == "none") return std::vector<std::string>{};
  if (flag != "auto") return ParseList("--gpus", flag);
  if (visible != nullptr) {
    const std::string list = visible;
    // CUDA reads an empty or "-1" list as "no GPU".
    if (absl::StripAsciiWhitespace(list).empty() || list == "-1") {
      return std::vector<std::string>{};
    }
    return ParseList("CUDA_VISIBLE_DEVICES (for --gpus auto)", list);
  }
  std::vector<std::string> gpus;
  for (size_t i = 0; i < kMaxGpus; ++i) {
    if (access(absl::StrCat(dev, "/nvidia", i).c_str(), F_OK) == 0) {
      gpus.push_back(absl::StrCat(gpus.size()));
    }
  }
  return gpus;
}

std::optional<std::string> GpuPool::Take() {
  if (free_.empty()) return std::nullopt;
  std::string gpu = std::move(free_.front());
  free_.erase(free_.begin());
  return gpu;
}

void GpuPool::Give(std::string gpu) { free_.push_back(std::move(gpu)); }

}  // namespace trainctl::agent
