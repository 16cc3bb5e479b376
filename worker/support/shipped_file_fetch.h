#pragma once

// A rank's side of shipped files (common/shipped_files.h): the files its
// job's spec names by relative paths, fetched from the coordinator
// (Rendezvous.FetchFile, admitted by the generation's key) into the node's
// cache, and the spec's fields pointed at those copies.

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "trainctl/v1/rendezvous.grpc.pb.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl::train {

struct ShippedFileSource {
  std::shared_ptr<v1::Rendezvous::StubInterface> stub;
  v1::Scope scope;              // the rank's job and generation
  std::string rendezvous_key;   // admits the rank
  // Where copies are kept, shared by the node's ranks (<data cache>/shipped).
  std::string cache_dir;
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
};

// For each of spec->shipped_files(): a copy in source.cache_dir whose
// sha256 is checked at every use (downloaded when missing or wrong), then
// its field set to that copy's path. Copies nobody used for a week are
// deleted. Errors name the field and the path as written in the spec.
absl::Status FetchShippedFiles(v1::JobSpec* spec, const ShippedFileSource& source);

}  // namespace trainctl::train
