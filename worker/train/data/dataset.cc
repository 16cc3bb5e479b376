// LoadDatasets: picks the reader for data.format, merges what the train and
// eval sets say about the data, and applies the eval_fraction split.

#include "worker/train/data/dataset.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/data_probe.h"
#include "common/data_shards.h"
#include "common/shard_plan.h"
#include "common/status_macros.h"
#include "common/vocabulary.h"
#include "worker/train/data/idx.h"
#include "worker/train/data/image_transforms.h"
#include "worker/train/data/in_memory.h"
#include "worker/train/data/readers.h"
#include "worker/support/shard_manifest.h"

namespace trainctl::train {
namespace {

// The "epoch" of the eval_fraction permutation: training epochs count from
// 0, so the split never coincides with an epoch's visiting order.
constexpr int64_t kSplitEpoch = -1;

// Up to this many bytes of token files, the vocabulary is always scanned
// (well under a second from the page cache), so a wrong model.vocab_size
// fails before the first step; past it, a declared vocab_size is taken and
// ids are checked as windows are read, and the first step waits for no
// scan.
constexpr int64_t kScanAlwaysBytes = int64_t{256} << 20;

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<LoadedSet> ReadIdxSet(const std::string& images,
                                     const std::string& labels, int64_t limit,
                                     const std::string& field,
                                     Task task,
                                     const DecodedFileCache* cache) {
  if (task == Task::kLanguageModel) {
    return absl::InvalidArgumentError(
        "data.format: idx holds labelled images; task language_model needs "
        "tokens, text or tensors");
  }
  ASSIGN_OR_RETURN(IdxData idx, LoadIdx(images, labels, limit, field, cache));
  LoadedSet out;
  torch::Tensor inputs = idx.inputs.unsqueeze(1);  // [N, 1, H, W] for CNNs
  out.info.input_shape.assign(inputs.sizes().begin() + 1, inputs.sizes().end());
  torch::Tensor targets = idx.labels;
  if (task == Task::kRegression) {
    targets = targets.to(torch::kFloat32);
  } else {
    out.info.num_classes = targets.max().item<int64_t>() + 1;
  }
  out.data = std::make_shared<TensorDataset>(std::move(inputs),
                                             std::move(targets), kPixelScale);
  return out;
}

absl::StatusOr<LoadedSet> ReadFile(const ReadRequest& req,
                                   const v1::DataSpec& d) {
  if (d.format() == "csv") return d.text_column().empty() ? ReadCsv(req, d) : ReadCsvText(req, d);
  if (d.format() == "tokens") return ReadTokens(req, d);
  if (d.format() == "text") return ReadText(req, d);
  if (d.format() == "tensors") return ReadTensors(req);
  if (d.format() == "npy") return ReadNpy(req, d);
  if (d.format() == "webdataset") return ReadWebDataset(req, d);
  if (d.format() == "audio") return ReadAudio(req, d);
  return absl::InvalidArgumentError(
      absl::StrCat("data.format: unknown format '", d.format(),
                   "' (expected idx, csv, tokens, text, tensors, npy, "
                   "webdataset or audio)"));
}

// The facts every shard of one set must share, the model being built once.
absl::Status CheckShardAgrees(const DataInfo& first, const DataInfo& shard,
                              const std::string& field,
                              const std::string& path) {
  if (shard.input_names != first.input_names) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": shard ", path, " names its inputs differently from the "
        "first shard (", shard.input_names.size(), " against ",
        first.input_names.size(), " named inputs, or other names)"));
  }
  if (shard.input_shape != first.input_shape ||
      shard.integer_inputs != first.integer_inputs ||
      shard.target_width != first.target_width) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": shard ", path, " holds samples of ",
        shard.integer_inputs ? "token ids " : "features ",
        ShapeString(shard.input_shape), " (targets of width ",
        shard.target_width, ") but the first shard ",
        first.integer_inputs ? "token ids " : "features ",
        ShapeString(first.input_shape), " (width ", first.target_width, ")"));
  }
  return absl::OkStatus();
}

// One set from the file(s) its path names: a plain file as it is, shards
// one after another with their manifest appended to `manifest`.
absl::StatusOr<LoadedSet> ReadPath(ReadRequest req, const v1::DataSpec& d,
                                   const DecodedFileCache* cache,
                                   Datasets* out_manifest) {
  ASSIGN_OR_RETURN(const std::vector<std::string> shards,
                   ResolveShards(req.field, req.path));
  // Paired with train_path's shards in order: labels, then named inputs.
  auto paired = [&](const std::string& field, const std::string& path)
      -> absl::StatusOr<std::vector<std::string>> {
    ASSIGN_OR_RETURN(std::vector<std::string> files, ResolveShards(field, path));
    if (files.size() != shards.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", path, ": names ", files.size(), " files but ", req.field,
          " names ", shards.size()));
    }
    return files;
  };
  std::vector<std::string> label_shards;
  if (d.format() == "npy" && !req.labels_path.empty()) {
    ASSIGN_OR_RETURN(label_shards, paired(req.labels_field, req.labels_path));
  }
  std::vector<std::vector<std::string>> input_shards;
  for (const ReadRequest::NamedFile& input : req.more_inputs) {
    ASSIGN_OR_RETURN(input_shards.emplace_back(), paired(input.field, input.path));
  }
  int64_t bytes = 0;
  for (const std::string& shard : shards) {
    struct stat st;
    if (::stat(shard.c_str(), &st) == 0) bytes += st.st_size;
  }
  req.vocab_from_declaration = req.vocab_size > 0 && bytes > kScanAlwaysBytes;
  if (!NamesShards(req.path)) return ReadFile(req, d);

  std::vector<std::shared_ptr<const Dataset>> parts;
  std::vector<std::string> used, used_labels;
  LoadedSet out;
  int64_t rows = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    ReadRequest part = req;
    part.path = shards[i];
    if (!label_shards.empty()) part.labels_path = label_shards[i];
    for (size_t k = 0; k < input_shards.size(); ++k) {
      part.more_inputs[k].path = input_shards[k][i];
    }
    // The limit is on the whole set: the first shards' rows.
    part.limit = req.limit > 0 ? req.limit - rows : 0;
    ASSIGN_OR_RETURN(LoadedSet set, ReadFile(part, d));
    if (parts.empty()) {
      out.info = set.info;
    } else {
      RETURN_IF_ERROR(CheckShardAgrees(out.info, set.info, req.field, shards[i]));
      out.info.num_classes = std::max(out.info.num_classes, set.info.num_classes);
      out.info.vocab_size = std::max(out.info.vocab_size, set.info.vocab_size);
    }
    rows += set.data->size();
    parts.push_back(std::move(set.data));
    used.push_back(shards[i]);
    if (!label_shards.empty()) used_labels.push_back(label_shards[i]);
    if (req.limit > 0 && rows >= req.limit) break;
  }
  out.data = std::make_shared<ConcatDataset>(std::move(parts));
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(const std::string inputs, ShardManifest(req.field, used, cache));
  ASSIGN_OR_RETURN(const std::string labels,
                   ShardManifest(req.labels_field, used_labels, cache));
  absl::StrAppend(&out_manifest->manifest, inputs, labels);
  for (size_t k = 0; k < input_shards.size(); ++k) {
    const std::vector<std::string> used_inputs(input_shards[k].begin(),
                                               input_shards[k].begin() + used.size());
    ASSIGN_OR_RETURN(const std::string named,
                     ShardManifest(req.more_inputs[k].field, used_inputs, cache));
    absl::StrAppend(&out_manifest->manifest, named);
  }
  out_manifest->manifest_ms += std::chrono::duration<double, std::milli>(
                                   std::chrono::steady_clock::now() - start)
                                   .count();
  return out;
}

absl::StatusOr<LoadedSet> ReadSet(const v1::JobSpec& spec, bool eval,
                                  const DecodedFileCache* cache,
                                  Datasets* manifest) {
  const v1::DataSpec& d = spec.data();
  const Task task = TaskOf(spec);
  if (d.format() == "idx") {
    return eval ? ReadIdxSet(d.eval_images(), d.eval_labels(), d.eval_limit(),
                             "data.eval", task, cache)
                : ReadIdxSet(d.train_images(), d.train_labels(),
                             d.train_limit(), "data.train", task, cache);
  }
  ReadRequest req;
  req.path = eval ? d.eval_path() : d.train_path();
  req.field = eval ? "data.eval_path" : "data.train_path";
  req.limit = eval ? d.eval_limit() : d.train_limit();
  req.task = task;
  req.vocab_size = spec.model().vocab_size();
  req.labels_path = eval ? d.eval_labels() : d.train_labels();
  req.labels_field = eval ? "data.eval_labels" : "data.train_labels";
  if (cache != nullptr && cache->UnusableDirReason().empty()) {
    req.scratch_dir = cache->dir();
  } else if (const char* tmp = getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') {
    req.scratch_dir = tmp;
  }
  if (d.format() == "audio") {
    ASSIGN_OR_RETURN(req.class_names, AudioTrainingClasses(d));
  } else if (d.format() == "csv" && !d.text_column().empty() && task == Task::kClassification) {
    ASSIGN_OR_RETURN(req.class_names, CsvTextTrainingClasses(d));
  }
  // In train_inputs' order, so both sets name their inputs alike.
  req.input_name = d.input_name();
  for (const v1::NamedPath& input : d.train_inputs()) {
    const auto& inputs = eval ? d.eval_inputs() : d.train_inputs();
    for (const v1::NamedPath& named : inputs) {
      if (named.name() != input.name()) continue;
      req.more_inputs.push_back(
          {named.name(), named.path(),
           absl::StrCat(eval ? "data.eval_inputs." : "data.train_inputs.", named.name())});
    }
  }
  return ReadPath(req, d, cache, manifest);
}

// Folds the eval set's facts into the train set's; the model is built once,
// so both sets must agree on sample shape and kind.
absl::Status MergeInfo(const DataInfo& eval, const std::string& eval_field,
                       DataInfo* info) {
  if (eval.input_names != info->input_names) {
    return absl::InvalidArgumentError(absl::StrCat(
        eval_field, ": the eval set's inputs are named differently from the "
        "training set's (", eval.input_names.size(), " against ",
        info->input_names.size(), " named inputs, or other names)"));
  }
  if (eval.input_shape != info->input_shape ||
      eval.integer_inputs != info->integer_inputs) {
    return absl::InvalidArgumentError(absl::StrCat(
        eval_field, ": eval samples are ",
        eval.integer_inputs ? "token ids " : "features ",
        ShapeString(eval.input_shape), " but training samples are ",
        info->integer_inputs ? "token ids " : "features ",
        ShapeString(info->input_shape)));
  }
  if (eval.target_width != info->target_width) {
    return absl::InvalidArgumentError(absl::StrCat(
        eval_field, ": eval targets have width ", eval.target_width,
        " but training targets ", info->target_width));
  }
  info->num_classes = std::max(info->num_classes, eval.num_classes);
  info->vocab_size = std::max(info->vocab_size, eval.vocab_size);
  return absl::OkStatus();
}

absl::Status SplitOffEval(const v1::JobSpec& spec, Datasets* out) {
  const v1::DataSpec& d = spec.data();
  const int64_t n = out->train->size();
  const int64_t n_eval =
      std::llround(static_cast<double>(n) * d.eval_fraction());
  if (n_eval < 1 || n_eval >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.eval_fraction: ", d.eval_fraction(), " of ", n,
                     " training samples leaves ", n_eval, " for eval and ",
                     n - n_eval, " for training; both need at least one"));
  }
  // Positions [0, n_eval) of a seeded order are the eval set, the rest the
  // training set: no index list, whatever n is. eval_limit keeps the first
  // eval positions, so a limited eval set is still a random sample rather
  // than the head of the file.
  const EpochOrder split(spec.seed(), kSplitEpoch, n);
  const int64_t keep_eval =
      d.eval_limit() > 0 ? std::min(d.eval_limit(), n_eval) : n_eval;
  const std::shared_ptr<const Dataset> all = out->train;
  out->eval = std::make_shared<OrderedSubsetDataset>(all, split, 0, keep_eval);
  out->train =
      std::make_shared<OrderedSubsetDataset>(all, split, n_eval, n - n_eval);
  return absl::OkStatus();
}

absl::StatusOr<Datasets> LoadOrThrow(const v1::JobSpec& spec,
                                     const DecodedFileCache* cache) {
  const v1::DataSpec& d = spec.data();
  Datasets out;
  ASSIGN_OR_RETURN(LoadedSet train, ReadSet(spec, /*eval=*/false, cache, &out));
  out.train = std::move(train.data);
  out.info = train.info;
  const bool has_eval_set =
      d.format() == "idx" ? !d.eval_images().empty() : !d.eval_path().empty();
  if (has_eval_set) {
    ASSIGN_OR_RETURN(LoadedSet eval, ReadSet(spec, /*eval=*/true, cache, &out));
    RETURN_IF_ERROR(MergeInfo(
        eval.info, d.format() == "idx" ? "data.eval_images" : "data.eval_path",
        &out.info));
    out.eval = std::move(eval.data);
  } else if (d.eval_fraction() > 0) {
    RETURN_IF_ERROR(SplitOffEval(spec, &out));
  }
  v1::ImageTransformsSpec transforms = d.transforms();
  if (transforms.normalize().from_data()) {
    ASSIGN_OR_RETURN(*transforms.mutable_normalize(),
                     NormalizationFromData(*out.train, out.info, spec.seed()));
    for (int c = 0; c < transforms.normalize().mean_size(); ++c) {
      out.plan_facts[absl::StrCat("normalize_mean_", c)] = transforms.normalize().mean(c);
      out.plan_facts[absl::StrCat("normalize_std_", c)] = transforms.normalize().std(c);
    }
  }
  ASSIGN_OR_RETURN(out.train_transforms,
                   ImageTransforms::Create(transforms, out.info, spec.seed()));
  if (out.train_transforms) {
    out.info.input_shape = out.train_transforms->output_shape();
    if (out.eval) out.eval = WithEvalTransforms(out.eval, out.train_transforms);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> ReadWholeFile(const std::string& path,
                                          const std::string& field) {
  auto fail = [&](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", path, ": ", what, ": ", std::strerror(errno)));
  };
  // A regular file only: a FIFO would block, /dev/zero would never end.
  struct stat st;
  ASSIGN_OR_RETURN(const int fd, OpenRegularFile(field, path, &st));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(fdopen(fd, "rb"),
                                                       &std::fclose);
  if (!file) {
    ::close(fd);
    return fail("cannot open");
  }
  std::string bytes;
  bytes.reserve(static_cast<size_t>(st.st_size));
  char chunk[1 << 16];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof(chunk), file.get())) > 0) {
    bytes.append(chunk, n);
  }
  if (std::ferror(file.get())) return fail("cannot read");
  return bytes;
}

absl::StatusOr<Datasets> LoadDatasets(const v1::JobSpec& spec,
                                      const DecodedFileCache* cache) {
  // Torch reports failures (allocation, conversions) by exception; none may
  // escape to the trainer. Their text is not passed on: torch's can quote
  // tensor values or names read from the file, which may be any file the
  // worker can read (security review C1).
  try {
    return LoadOrThrow(spec, cache);
  } catch (const c10::Error&) {
    return absl::InternalError(absl::StrCat(
        "data: loading data.format ", spec.data().format(),
        " failed inside torch (its message is not shown: it may quote the "
        "data)"));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "data: out of memory while loading the data set");
  } catch (const std::exception&) {
    return absl::InternalError(absl::StrCat(
        "data: loading data.format ", spec.data().format(),
        " failed (its message is not shown: it may quote the data)"));
  }
}

}  // namespace trainctl::train
