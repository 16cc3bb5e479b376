#pragma once

// `submit --set key.path=value` and `--name`: edits to a job spec's YAML
// (or JSON, which is YAML) made before it is sent. Pure: text in, text out.
// The coordinator still validates the result, so a path the schema does not
// know is refused there, with its name.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainctl::client {

struct SpecEdits {
  // "training.epochs=3": a dotted path of mapping keys (a number indexes an
  // existing list: model.hidden.0=128), then the value as YAML (3, 0.1,
  // true, adamw, "007", [256, 128], {type: sgd}). Applied in order; missing
  // mappings on the way are created.
  std::vector<std::string> sets;
  std::string name;  // replaces the top-level `name` (always a string)
};

// The spec text with the edits applied, or the text unchanged when there
// are none. INVALID_ARGUMENT naming the --set at fault (no '=', an empty
// path segment, a value that is not YAML, a path through a value that is
// not a mapping), or the problems of a spec that is not valid YAML or is
// not a mapping.
absl::StatusOr<std::string> ApplySpecEdits(const std::string& text,
                                           const SpecEdits& edits);

}  // namespace trainctl::client
