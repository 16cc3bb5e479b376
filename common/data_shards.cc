#include "common/data_shards.h"

#include <dirent.h>
#include <glob.h>
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
    glob_t matches;
    const int rc = ::glob(path.c_str(), GLOB_ERR | GLOB_NOSORT, nullptr, &matches);
    if (rc != 0 && rc != GLOB_NOMATCH) {
      ::globfree(&matches);
      return bad("cannot expand the pattern (a directory on its way is unreadable)");
    }
    for (size_t i = 0; rc == 0 && i < matches.gl_pathc; ++i) {
      if (IsRegular(matches.gl_pathv[i])) files.push_back(matches.gl_pathv[i]);
      if (files.size() > static_cast<size_t>(kMaxShards)) break;
    }
    ::globfree(&matches);
  }
  if (files.empty()) return bad("names no regular file");
  if (files.size() > static_cast<size_t>(kMaxShards)) {
    return bad(absl::StrCat("names more than ", kMaxShards, " files"));
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace trainctl
