#include "coordinator/auth/worker_enrollment.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "coordinator/auth/dir_lock.h"

namespace trainctl::coordinator::auth {
namespace {

struct Line {
  std::string name, fingerprint;
  int slots = 0;  // 0: joined before slots were recorded
};

absl::StatusOr<std::vector<Line>> ReadRecord(const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (absl::IsNotFound(text.status())) return std::vector<Line>{};
  if (!text.ok()) return text.status();
  std::vector<Line> lines;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    if (line[0] == '#') continue;
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int slots = 0;
    if (f.size() == 3 && !absl::SimpleAtoi(f[2], &slots)) continue;
    if (f.size() == 2 || f.size() == 3) lines.push_back({f[0], f[1], slots});
  }
  return lines;
}

absl::Status WriteRecord(const std::string& path, const std::vector<Line>& lines) {
  std::string text =
      "# trainctl worker names, the keys they were certified for and the "
      "slots they joined with\n";
  for (const Line& l : lines) {
    absl::StrAppend(&text, l.name, " ", l.fingerprint);
    if (l.slots > 0) absl::StrAppend(&text, " ", l.slots);
    absl::StrAppend(&text, "\n");
  }
  AtomicWriteOptions options;
  options.mode = 0600;
  options.keep_owner = true;
  return WriteFileAtomically(path, text, options);
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

absl::Status WorkerEnrollment::Admit(const std::string& name,
                                     const std::string& fingerprint,
                                     int slots) {
  std::lock_guard<std::mutex> lock(mu_);
  const DirLock file_lock(DirOf(path_));  // forget-worker edits it too
  absl::StatusOr<std::vector<Line>> lines = ReadRecord(path_);
  if (!lines.ok()) return lines.status();
  for (Line& l : *lines) {
    if (l.name != name) continue;
    if (l.fingerprint != fingerprint) {
      return absl::PermissionDeniedError(absl::StrCat(
          "a certificate for worker '", name,
          "' was already issued for another key; if that node lost its key, "
          "an admin runs `trainctl-coordinator forget-worker ",
          name, "` first"));
    }
    if (l.slots == slots) return absl::OkStatus();  // renewal
    l.slots = slots;  // the node itself (same key) joined with new slots
    return WriteRecord(path_, *lines);
  }
  lines->push_back({name, fingerprint, slots});
  return WriteRecord(path_, *lines);
}

absl::StatusOr<int> WorkerEnrollment::EnrolledSlots(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<std::vector<Line>> lines = ReadRecord(path_);
  if (!lines.ok()) return lines.status();
  for (const Line& l : *lines) {
    if (l.name == name) return l.slots;
  }
  return absl::NotFoundError(
      absl::StrCat("no worker named '", name, "' has joined"));
}

absl::Status ForgetWorker(const std::string& state_dir, const std::string& name) {
  const std::string path = state_dir + "/auth/workers";
  // The running coordinator may be admitting a worker at the same moment.
  const DirLock file_lock(state_dir + "/auth");
  absl::StatusOr<std::vector<Line>> lines = ReadRecord(path);
  if (!lines.ok()) return lines.status();
  std::vector<Line> kept;
  for (const Line& l : *lines) {
    if (l.name != name) kept.push_back(l);
  }
  if (kept.size() == lines->size()) {
    return absl::NotFoundError(absl::StrCat("no worker named '", name, "' in ", path));
  }
  return WriteRecord(path, kept);
}

}  // namespace trainctl::coordinator::auth
