#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "trainctl/v1/spec.pb.h"

namespace trainctl {

// The metadata of a trainctl model file (safetensors: strings only), which
// examples/trainctl_models.py reads to rebuild the model and its inputs:
// trainctl.model and trainctl.transforms (proto JSON), trainctl.task,
// trainctl.eval (the evaluation at that step, JSON), trainctl.job_id,
// trainctl.job_name, trainctl.step, trainctl.epoch, and format "pt".
// `transforms`: data.transforms as applied, normalize.from_data's
// statistics filled in; written only when the spec has transforms.
// trainctl.text (JSON), for text read through data.tokenizer or a CSV
// data.text_column: seq_len, text_column, and the tokenizer's path as the
// spec names it, with its tokenizer_sha256 when it was shipped.
// The same for `trainctl export` and the model a job logs to MLflow.
std::map<std::string, std::string> ModelFileMetadata(
    const v1::JobSpec& spec, const std::string& job_id, int64_t step, int epoch,
    const std::map<std::string, double>& eval, const v1::ImageTransformsSpec& transforms);

}  // namespace trainctl
