#pragma once

// The sections of a job spec that say where its by-products go rather than
// what it trains: tensorboard, tracking and profile (spec_outputs.cc).

#include <string>
#include <vector>

#include "common/spec_reader.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl {

// Reads those sections of `top` into `spec`, adding "path: what" problems
// to `errors`.
void ReadOutputs(SpecReader& top, v1::JobSpec* spec,
                 std::vector<std::string>* errors);

}  // namespace trainctl
