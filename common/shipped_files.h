#pragma once

// Files from the submitter's machine. A relative path in one of a spec's
// file fields (model.path, data.train_path, ...) names a file beside the
// spec on the machine that submits it: `trainctl submit` uploads it
// (Jobs.PutFile) and lists it in the spec's shipped_files with its digest,
// and each rank fetches it from the coordinator (Rendezvous.FetchFile)
// into its node's cache. An absolute path names a file on the workers.

#include <string>
#include <vector>

#include "common/spec_reader.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl {

// The spec fields that may name a shipped file, as dotted paths, for
// messages (data.train_inputs.NAME stands for each named input).
const std::vector<std::string>& ShippableFields();

// The file fields of this spec: ShippableFields with each named input's.
std::vector<std::string> SpecFileFields(const v1::JobSpec& spec);

// The field's value in `spec`; null for a name that is not a file field.
const std::string* SpecFilePath(const v1::JobSpec& spec, const std::string& field);
std::string* MutableSpecFilePath(v1::JobSpec* spec, const std::string& field);

// A path that names a file on the submitter's machine: not empty, not absolute.
bool IsSubmitterPath(const std::string& path);

// Reads the shipped_files section (after model and data) and checks each
// entry: a file field, named once, whose value in the spec is the entry's
// relative path; a sha256 of 64 lowercase hex digits; a size >= 0.
void ReadShippedFiles(SpecReader& top, v1::JobSpec* spec,
                      std::vector<std::string>* errors);

// "field: what" for each relative file path that shipped_files does not
// list (the coordinator refuses such a submission: the ranks would look for
// it in the worker's directory).
std::vector<std::string> UnshippedRelativePaths(const v1::JobSpec& spec);

}  // namespace trainctl
