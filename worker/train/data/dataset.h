#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "trainctl/v1/spec.pb.h"
#include "worker/support/decoded_cache.h"

namespace trainctl::train {

class ImageTransforms;  // image_transforms.h

// A model's inputs besides the first, by the name its forward takes each
// under (a Hugging Face model's attention_mask, token_type_ids); row i of
// each goes with row i of Batch::inputs.
using NamedInputs = std::vector<std::pair<std::string, torch::Tensor>>;

// One batch: inputs [n, ...] and targets. Targets are class ids (int64 [n])
// for classification, next-token ids (int64 [n, seq_len]) for language
// models, and float values ([n] or [n, k]) for regression.
struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
  std::vector<int64_t> indices;  // sample ids, only when the plan records them
  NamedInputs more_inputs;       // empty unless the data names its inputs
};

// A random-access dataset held in memory. Thread-safe for concurrent Gather.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The rows at `indices` (each in [0, size())), stacked in that order.
  virtual Batch Gather(const std::vector<int64_t>& indices) const = 0;
};

// What the model builder needs to know about the data.
struct DataInfo {
  std::vector<int64_t> input_shape;  // one sample's input shape
  bool integer_inputs = false;       // token ids rather than features
  int64_t num_classes = 0;           // classification: max label + 1
  int64_t vocab_size = 0;            // token data: max token id + 1
  int64_t target_width = 1;          // regression: values per sample
  // Data whose inputs are named (tensors: x is a dict): the name of
  // Batch::inputs, then those of Batch::more_inputs in order. Empty when
  // the data has one unnamed input. input_shape and integer_inputs
  // describe the first.
  std::vector<std::string> input_names;
};

struct Datasets {
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> eval;  // null when the spec has no eval set
  DataInfo info;  // input_shape: after data.transforms
  // data.transforms for training batches (BatchPrefetcher applies them);
  // null when there are none. `eval` has its own applied already.
  std::shared_ptr<const ImageTransforms> train_transforms;
  // What loading found that the job's plan metric reports (normalize
  // from_data: normalize_mean_C, normalize_std_C per channel C).
  std::map<std::string, double> plan_facts;
  // Sharded paths only: each shard's path, size and CRC-32
  // (shard_manifest.h), which every rank checks against rank 0's.
  std::string manifest;
  double manifest_ms = 0;  // time spent on it (checksums not yet cached)
};

// Loads the train and eval sets a spec describes (data.format, paths,
// limits, eval_fraction split by spec.seed). Errors are INVALID_ARGUMENT
// naming the spec field and the file at fault.
//
// Per format, one sample is:
//   idx      inputs float [1, H, W] in [0, 1]; targets int64 class id.
//   csv      inputs float [num_features]; targets int64 class id, or float
//            (task regression).
//   tokens,  inputs and targets int64 [seq_len], targets shifted by one
//   text     token; text is byte-level (vocab_size 256).
//   tensors  row i of torch.save({"x": X, "y": Y}); integer X = token ids.
//            X may be a dict of named inputs {"input_ids": I,
//            "attention_mask": M, ...}: input_ids (else the first) is
//            Batch::inputs, the others Batch::more_inputs.
// With eval_fraction > 0 and no eval set, a seeded permutation (identical
// on every rank) moves round(n * eval_fraction) training samples to eval.
// data.transforms (image_transforms.h) are checked against the samples'
// shape; the eval set comes back transformed, the train set does not.
// With a `cache`, gzip-compressed IDX files are read from decoded copies.
// A path of any format but idx may name shards (common/data_shards.h): a
// directory or a glob, read as one set in path order (for npy, the labels
// path names as many files, paired in order).
absl::StatusOr<Datasets> LoadDatasets(const v1::JobSpec& spec,
                                      const DecodedFileCache* cache = nullptr);

}  // namespace trainctl::train
