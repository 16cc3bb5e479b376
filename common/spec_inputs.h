#pragma once

// data.train_inputs, data.eval_inputs and data.input_name: an npy job's
// further named model inputs (docs/job-spec.md, "Named inputs").

#include <string>
#include <vector>

#include "common/spec_reader.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl {

// A Python identifier of at most 64 bytes: a name a model's forward takes
// an input under.
bool IsInputName(const std::string& name);

// Reads the three fields from the data section `s`. train_inputs and
// eval_inputs are a map name: path, or a list of {name, path} (what
// `status -o json` prints).
void ReadNamedInputs(SpecReader& s, v1::DataSpec* d, std::vector<std::string>* errors);

// Their rules against the rest of the spec: npy only, not for a token
// stream, identifiers named once and not input_name, eval_inputs naming
// what train_inputs names exactly when there is an eval_path.
void CheckNamedInputs(const v1::JobSpec& spec, std::vector<std::string>* errors);

}  // namespace trainctl
