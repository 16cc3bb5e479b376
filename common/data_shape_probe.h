#pragma once

// What a spec's training data says about the model's size, for the memory
// plan of a dry run (common/memory_plan.h): one sample's input shape and
// the number of classes. Like data_probe.h it opens user-named files, so it
// runs only on a worker; it never reports a file's bytes, only sizes.

#include "common/data_probe.h"
#include "common/memory_plan.h"

namespace trainctl {

// What can be told cheaply: idx (the image header's rows and columns, and
// the largest label + 1, reading the label file within limits), npy (the
// inputs array's shape after its first dimension), csv (the columns of the
// first row, less the label), audio (the classes of its manifests, as the
// ranks count them; the shape is the spec's). Anything else, or a file that cannot be
// read, leaves the fields unknown (empty, 0): the dry run then says what it
// could not plan. The first file of a sharded set stands for all (audio
// reads every manifest: its classes may be names).
PlanData ProbeSampleShape(const v1::DataSpec& data, const DataProbeLimits& limits);

}  // namespace trainctl
