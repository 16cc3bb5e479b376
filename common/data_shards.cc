#include "common/data_shards.h"

#include <dirent.h>
#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace trainctl {
namespace {

bool IsRegular(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

// An existing file is itself, even with * ? or [ in its name.
bool NamesShards(const std::string& path) {
  if (IsRegular(path)) return false;
  return path.find_first_of("*?[") != std::string::npos || IsDirectory(path);
}

absl::StatusOr<std::vector<std::string>> ResolveShards(const std::string& field,
                                                       const std::string& path) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", path, ": ", why));
  };
  std::vector<std::string> files;
  if (!NamesShards(path)) return std::vector<std::string>{path};
  if (IsDirectory(path)) {
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) return bad(absl::StrCat("cannot list: ", std::strerror(errno)));
    const std::string prefix = path.back() == '/' ? path : path + "/";
    while (const dirent* entry = ::readdir(dir)) {
      if (entry->d_name[0] == '.') continue;
      const std::string file = prefix + entry->d_name;
      if (IsRegular(file)) files.push_back(file);
      if (files.size() > static_cast<size_t>(kMaxShards)) break;
    }
    ::closedir(dir);
  } else {
    // The pattern is the file name's only: one directory is listed, so a
    // spec cannot make a worker walk a whole tree (the data probe runs in
    // the agent).
    const size_t slash = path.rfind('/');
    const std::string dir_path = slash == std::string::npos ? "." : path.substr(0, slash + 1);
    const std::string pattern = path.substr(slash == std::string::npos ? 0 : slash + 1);
    if (dir_path.find_first_of("*?[") != std::string::npos) {
      return bad("only the file name may hold * ? or [ (e.g. tokens/*.bin)");
    }
    DIR* dir = ::opendir(dir_path.c_str());
    if (dir == nullptr) {
      return bad(absl::StrCat("cannot list ", dir_path, ": ", std::strerror(errno)));
    }
    while (const dirent* entry = ::readdir(dir)) {
      if (::fnmatch(pattern.c_str(), entry->d_name, FNM_PERIOD) != 0) continue;
      const std::string file = (slash == std::string::npos ? "" : dir_path) + entry->d_name;
      if (IsRegular(file)) files.push_back(file);
      if (files.size() > static_cast<size_t>(kMaxShards)) break;
    }
    ::closedir(dir);
  }
  if (files.empty()) return bad("names no regular file");
  if (files.size() > static_cast<size_t>(kMaxShards)) {
    return bad(absl::StrCat("names more than ", kMaxShards, " files"));
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace trainctl
