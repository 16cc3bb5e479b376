#pragma once

// SentencePiece through trainctl-tokenizer (tokenizer/main.cc), which runs
// as a child process because Debian's libsentencepiece carries its own
// protobuf and Abseil and cannot be loaded beside ours. Used by the rank
// (data.tokenizer), the agent's data probe and `trainctl tokenizer`.
//
// Errors name the spec field (or command-line option) and the file, never
// a byte of text: the texts are users' data.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace trainctl {

// Where trainctl-tokenizer is: $TRAINCTL_TOKENIZER when set, else beside
// the running program, else on PATH. FAILED_PRECONDITION when none is.
absl::StatusOr<std::string> FindTokenizerProgram();

// A model's vocabulary and its special ids (-1 when it has none).
struct TokenizerInfo {
  int64_t pieces = 0;
  int64_t unk_id = -1, bos_id = -1, eos_id = -1, pad_id = -1;
};

// Loads the model at `model` (named by `field` in errors).
absl::StatusOr<TokenizerInfo> ReadTokenizerInfo(const std::string& model,
                                                const std::string& field,
                                                absl::Time deadline = absl::InfiniteFuture());

// Encodes each non-empty line of `text` (named by `text_field`), each
// followed by the model's end-of-sentence id when it has one, as uint32
// little-endian ids written to the open file `out_fd` (from its start; it
// may be unlinked, or /dev/null). Returns how many ids were written.
absl::StatusOr<int64_t> EncodeTextLines(const std::string& model, const std::string& model_field,
                                        const std::string& text, const std::string& text_field,
                                        int out_fd, absl::Time deadline = absl::InfiniteFuture());

// Each of `texts` encoded (no end-of-sentence id). The texts and ids pass
// through anonymous memory files, so nothing is left on disk.
absl::StatusOr<std::vector<std::vector<int32_t>>> EncodeTexts(
    const std::string& model, const std::string& model_field,
    const std::vector<std::string>& texts);

// Writes `texts` as a records file (a uint32 length and the bytes each),
// the input of EncodeTexts and of training from CSV columns.
absl::Status WriteTextRecords(const std::vector<std::string>& texts, const std::string& path);

struct TokenizerTraining {
  std::vector<std::string> inputs;  // text files (one sentence a line) or records files
  bool records = false;             // inputs are records files
  std::string output;               // the model file to write
  int64_t vocab_size = 8000;
  std::string model_type = "unigram";  // unigram | bpe | char | word
  double character_coverage = 0.9995;
  int64_t max_sentences = 1000000;  // sampled from the inputs beyond this
};

// Trains a model with ids <unk> 0, <s> 1, </s> 2 and <pad> 3; returns its
// vocabulary. SentencePiece's reason when it refuses (e.g. a vocabulary
// larger than the text allows).
absl::StatusOr<TokenizerInfo> TrainTokenizer(const TokenizerTraining& training);

}  // namespace trainctl
