#include "client/ship_files.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/json_text.h"
#include "client/spec_edit.h"
#include "common/file_digest.h"
#include "common/shipped_files.h"
#include "common/spec.h"

namespace trainctl::client {
namespace {

std::string Entry(const v1::ShippedFile& f) {
  return absl::StrCat("{field: ", f.field(), ", path: ", JsonString(f.path()),
                      ", sha256: ", f.sha256(), ", size: ", f.size(), "}");
}

// The spec without its shipped_files, to read the rest when the list no
// longer matches it; the text itself when it is not a YAML mapping.
std::string WithoutShippedFiles(const std::string& text) {
  try {
    YAML::Node root = YAML::Load(text);
    if (!root.IsMap() || !root["shipped_files"]) return text;
    root.remove("shipped_files");
    YAML::Emitter out;
    out << root;
    return out.c_str();
  } catch (const YAML::Exception&) {
    return text;
  }
}

bool SameFiles(const google::protobuf::RepeatedPtrField<v1::ShippedFile>& listed,
               const std::vector<v1::ShippedFile>& now) {
  if (static_cast<size_t>(listed.size()) != now.size()) return false;
  for (size_t i = 0; i < now.size(); ++i) {
    const v1::ShippedFile& a = listed[static_cast<int>(i)];
    if (a.field() != now[i].field() || a.path() != now[i].path() ||
        a.sha256() != now[i].sha256() || a.size() != now[i].size()) {
      return false;
    }
  }
  return true;
}

std::string HumanBytes(int64_t bytes) {
  if (bytes < (1 << 10)) return absl::StrCat(bytes, " B");
  if (bytes < (1 << 20)) return absl::StrCat(bytes >> 10, " KiB");
  return absl::StrCat(bytes >> 20, " MiB");
}

}  // namespace

absl::StatusOr<std::string> ShipLocalFiles(const std::string& spec_text,
                                           const std::string& base_dir,
                                           const FileUploader& upload,
                                           std::ostream& progress) {
  // The list a spec already carries (one from `status -o json`) may be
  // stale: a file changed since, or a --set that named another file.
  absl::StatusOr<v1::JobSpec> listed = ParseJobSpec(spec_text);
  absl::StatusOr<v1::JobSpec> spec = listed;
  if (!spec.ok()) spec = ParseJobSpec(WithoutShippedFiles(spec_text));
  if (!spec.ok()) return spec_text;  // the coordinator lists its problems
  std::vector<v1::ShippedFile> entries;
  for (const std::string& field : SpecFileFields(*spec)) {
    const std::string& value = *SpecFilePath(*spec, field);
    if (!IsSubmitterPath(value)) continue;
    const std::string local = base_dir.empty() ? value : base_dir + "/" + value;
    const std::string where = absl::StrCat(field, ": ", value);
    struct stat st {};
    if (stat(local.c_str(), &st) != 0) {
      const int error = errno;
      // Sent before from another machine: the coordinator may have it.
      const v1::ShippedFile* before = nullptr;
      if (listed.ok()) {
        for (const v1::ShippedFile& f : listed->shipped_files()) {
          if (f.field() == field && f.path() == value) before = &f;
        }
      }
      if (before != nullptr) {
        entries.push_back(*before);
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": ", std::strerror(error), " (looked for ", local,
          "; a relative path names a file beside the spec, which trainctl "
          "uploads; an absolute path names a file on the workers)"));
    }
    if (!S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": is not a regular file; only single files are shipped from "
                 "this machine (give a directory or glob as an absolute path "
                 "on the workers)"));
    }
    absl::StatusOr<std::string> digest = Sha256OfFile(local);
    if (!digest.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", digest.status().message()));
    }
    absl::StatusOr<v1::PutFileResponse> sent = upload(local, *digest, st.st_size);
    if (!sent.ok()) {
      return absl::Status(sent.status().code(),
                          absl::StrCat(where, ": upload failed: ", sent.status().message()));
    }
    progress << (sent->already_stored() ? "already uploaded " : "uploaded ") << value
             << " (" << HumanBytes(st.st_size) << ", sha256 " << digest->substr(0, 12)
             << ")\n";
    v1::ShippedFile entry;
    entry.set_field(field);
    entry.set_path(value);
    entry.set_sha256(*digest);
    entry.set_size(st.st_size);
    entries.push_back(std::move(entry));
  }
  if (listed.ok() && SameFiles(listed->shipped_files(), entries)) return spec_text;
  std::string list = "[";
  for (size_t i = 0; i < entries.size(); ++i) {
    absl::StrAppend(&list, i == 0 ? "" : ", ", Entry(entries[i]));
  }
  list += "]";
  SpecEdits edits;
  edits.sets.push_back("shipped_files=" + list);
  return ApplySpecEdits(spec_text, edits);
}

}  // namespace trainctl::client
