#pragma once

// Per-format readers behind LoadDatasets (internal to trainctl_data).
// Each reads one set (train or eval) and reports what it learned about the
// data; LoadDatasets merges the two and applies eval_fraction.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/vocabulary.h"
#include "trainctl/v1/spec.pb.h"
#include "worker/train/data/dataset.h"
#include "worker/train/data/token_file.h"

namespace trainctl::train {

// One loaded set and the DataInfo facts taken from this set alone.
struct LoadedSet {
  std::shared_ptr<const Dataset> data;
  DataInfo info;
};

// What a reader needs besides the file: which spec field named it (for
// errors), the row limit (0 = all) and the task.
struct ReadRequest {
  std::string path;
  std::string field;  // e.g. "data.train_path"
  int64_t limit = 0;
  Task task = Task::kClassification;
  int64_t vocab_size = 0;  // model.vocab_size (0 = from the data)
  // Take vocab_size as the vocabulary, checking ids as they are read,
  // instead of scanning the token ids (set for large token sets).
  bool vocab_from_declaration = false;
  // format npy: the labels array, and the spec field that named it.
  std::string labels_path;
  std::string labels_field;
  // format npy: the further named inputs (data.train_inputs or
  // eval_inputs, in train_inputs' order); `path` is then input_name's.
  struct NamedFile {
    std::string name, path, field;
  };
  std::vector<NamedFile> more_inputs;
  std::string input_name;
  // format audio, and csv with text_column: the training set's classes by
  // name (ClassNamesOf), empty when its labels are class ids.
  std::vector<std::string> class_names;
  // Where data.tokenizer's ids of a text file are kept, in a file with no
  // name (the data cache's directory, else the temporary directory).
  std::string scratch_dir = "/tmp";
};

// The whole file's bytes, or INVALID_ARGUMENT "FIELD: PATH: cannot open: ..".
absl::StatusOr<std::string> ReadWholeFile(const std::string& path,
                                          const std::string& field);

absl::StatusOr<LoadedSet> ReadCsv(const ReadRequest& req,
                                  const v1::DataSpec& data);
// format csv with data.text_column: token ids [seq_len] of each row's text
// (data.tokenizer's subwords, else bytes) with an attention_mask, and its
// label.
absl::StatusOr<LoadedSet> ReadCsvText(const ReadRequest& req, const v1::DataSpec& data);
// format csv with text_column, task classification: the classes of every
// training file's labels, for ReadRequest::class_names of both sets.
absl::StatusOr<std::vector<std::string>> CsvTextTrainingClasses(const v1::DataSpec& data);
// The next-token windows of a token file (`options` names it, and, for a
// .npy, where its ids begin): vocabulary 256 for text's bytes, else
// `known_vocab` when given (a tokenizer's), the declared one
// (req.vocab_from_declaration) or the largest id + 1.
absl::StatusOr<LoadedSet> TokenWindowSet(const ReadRequest& req,
                                         TokenFileDataset::Options options,
                                         int64_t known_vocab = 0);
// format tokens: flat little-endian ids of data.token_dtype.
absl::StatusOr<LoadedSet> ReadTokens(const ReadRequest& req,
                                     const v1::DataSpec& data);
// format text: the file's bytes are the tokens (vocab 256), or with
// data.tokenizer its lines' subword ids, each line ended by </s>.
absl::StatusOr<LoadedSet> ReadText(const ReadRequest& req,
                                   const v1::DataSpec& data);
// format npy: np.save arrays; inputs [N, ...] with labels [N] (or [N, k]
// for regression), or, for task language_model, one 1-D token array.
absl::StatusOr<LoadedSet> ReadNpy(const ReadRequest& req,
                                  const v1::DataSpec& data);
// format webdataset: a tar of KEY.jpg/KEY.png images with KEY.cls labels.
// data.transforms.resize, when given, is applied to each image as it is
// decoded, so the images of a set may differ in size.
absl::StatusOr<LoadedSet> ReadWebDataset(const ReadRequest& req,
                                         const v1::DataSpec& data);
// format audio: a CSV manifest of sound files and class ids; each file is
// read as mono, resampled to data.audio.sample_rate, cut or zero-padded to
// clip_seconds and held as its log-mel spectrogram [1, n_mels, frames].
absl::StatusOr<LoadedSet> ReadAudio(const ReadRequest& req, const v1::DataSpec& data);
// format audio: the classes of every training manifest's labels, for
// ReadRequest::class_names of both sets.
absl::StatusOr<std::vector<std::string>> AudioTrainingClasses(const v1::DataSpec& data);
// format tensors: torch.save({"x": X, "y": Y}) from Python.
absl::StatusOr<LoadedSet> ReadTensors(const ReadRequest& req);

}  // namespace trainctl::train
