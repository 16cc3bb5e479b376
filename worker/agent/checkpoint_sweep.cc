#include "worker/agent/checkpoint_sweep.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <set>

#include "common/checkpoint_name.h"

namespace trainctl::agent {

std::vector<std::string> StaleCheckpoints(const v1::DeleteCheckpoints& request) {
  std::vector<std::string> stale;
  if (request.stale_below_step() <= 0 || request.dir().empty()) return stale;
  const std::set<std::string> keep(request.keep().begin(), request.keep().end());
  DIR* dir = ::opendir(request.dir().c_str());
  if (dir == nullptr) return stale;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    const std::optional<CheckpointName> parsed = ParseCheckpointFileName(name);
    if (!parsed || parsed->step >= request.stale_below_step()) continue;
    const std::string path = request.dir() + "/" + name;
    struct stat st;
    if (keep.count(path) == 0 && ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      stale.push_back(path);
    }
  }
  ::closedir(dir);
  std::sort(stale.begin(), stale.end());
  return stale;
}

}  // namespace trainctl::agent
