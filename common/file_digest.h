#pragma once

// SHA-256 over content that arrives in pieces (an upload, a download, a
// file read in chunks), as 64 lowercase hex digits.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace trainctl {

class Sha256Digest {
 public:
  Sha256Digest();
  ~Sha256Digest();
  Sha256Digest(const Sha256Digest&) = delete;
  Sha256Digest& operator=(const Sha256Digest&) = delete;

  void Update(absl::string_view bytes);
  // Ends the digest; call once.
  std::string Hex();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The digest of a regular file's content; the error names the path and the
// system's reason, never the content.
absl::StatusOr<std::string> Sha256OfFile(const std::string& path);

// 64 lowercase hex digits.
bool IsSha256Hex(absl::string_view s);

}  // namespace trainctl
