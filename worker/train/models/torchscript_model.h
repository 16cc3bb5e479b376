#pragma once

// A module saved from Python with torch.jit.save (or torch.jit.trace, as a
// Hugging Face model is exported), trained in place behind Model.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/train/data/dataset.h"
#include "worker/train/models/model.h"

namespace trainctl::train {

// Loads `path` and matches its forward (and its loss, when it defines one)
// to the data's inputs:
//  - data with one unnamed input: forward's first argument takes it; any
//    further arguments need defaults. loss(inputs, targets).
//  - named inputs (data.input_names): each is passed to the forward
//    argument of its name; the forward's other arguments need defaults,
//    and every named input must have an argument. loss takes the inputs by
//    name and the targets as its last argument.
// forward may return the output tensor, a tuple whose first item is it, or
// a dict with "logits" (what a traced Hugging Face model returns).
// INVALID_ARGUMENT naming model.path when the file cannot be loaded or its
// methods do not fit the data; the data's input names are not quoted.
absl::StatusOr<std::unique_ptr<Model>> LoadTorchScriptModel(
    const std::string& path, const DataInfo& data);

}  // namespace trainctl::train
