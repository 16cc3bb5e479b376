// format csv with data.text_column: one text cell and one label per row.
// Each text becomes seq_len token ids (SentencePiece subwords with
// data.tokenizer, else its UTF-8 bytes), cut at seq_len or padded, with an
// attention_mask of 1 per token and 0 per padding (dataset.h's named inputs).

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/class_labels.h"
#include "common/csv_text_rows.h"
#include "common/data_shards.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/tokenizer_client.h"
#include "common/vocabulary.h"
#include "worker/train/data/in_memory.h"
#include "worker/train/data/readers.h"

namespace trainctl::train {
namespace {

// The rows' texts as ids: subwords of data.tokenizer, else bytes.
struct EncodedTexts {
  std::vector<std::vector<int32_t>> ids;
  int64_t vocab_size = 256;
  int64_t pad_id = 0;
};

absl::StatusOr<EncodedTexts> Encode(const std::vector<std::string>& texts,
                                    const v1::DataSpec& data) {
  EncodedTexts out;
  if (data.tokenizer().empty()) {
    for (const std::string& text : texts) {
      out.ids.emplace_back(reinterpret_cast<const unsigned char*>(text.data()),
                           reinterpret_cast<const unsigned char*>(text.data()) + text.size());
    }
    return out;
  }
  ASSIGN_OR_RETURN(const TokenizerInfo info, ReadTokenizerInfo(data.tokenizer(), "data.tokenizer"));
  ASSIGN_OR_RETURN(out.ids, EncodeTexts(data.tokenizer(), "data.tokenizer", texts));
  out.vocab_size = info.pieces;
  // Padding is masked out, so any id serves; the model's own when it has one.
  out.pad_id = info.pad_id >= 0 ? info.pad_id : 0;
  return out;
}

// Regression targets: every label a finite number.
absl::StatusOr<std::vector<float>> Values(const CsvTextRows& rows, const ReadRequest& req) {
  std::vector<float> values;
  for (size_t i = 0; i < rows.labels.size(); ++i) {
    double v = 0;
    if (!absl::SimpleAtod(rows.labels[i], &v) || !std::isfinite(v)) {
      return absl::InvalidArgumentError(absl::StrCat(req.field, ": ", req.path, ": line ",
                                                     rows.lines[i],
                                                     ": the label is not a number (task regression)"));
    }
    values.push_back(static_cast<float>(v));
  }
  return values;
}

}  // namespace

absl::StatusOr<LoadedSet> ReadCsvText(const ReadRequest& req, const v1::DataSpec& data) {
  ASSIGN_OR_RETURN(const std::string file, ReadWholeFile(req.path, req.field));
  ASSIGN_OR_RETURN(const CsvTextRows rows,
                   ParseCsvTextRows(file, data, req.field, req.path, req.limit));
  ASSIGN_OR_RETURN(const EncodedTexts encoded, Encode(rows.texts, data));
  const int64_t n = static_cast<int64_t>(rows.texts.size());
  const int64_t seq_len = std::max(1, data.seq_len());
  torch::Tensor ids = torch::full({n, seq_len}, encoded.pad_id, torch::kInt64);
  torch::Tensor mask = torch::zeros({n, seq_len}, torch::kInt64);
  int64_t cut = 0, empty = 0;
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int32_t>& row = encoded.ids[static_cast<size_t>(i)];
    const int64_t used = std::min<int64_t>(seq_len, static_cast<int64_t>(row.size()));
    cut += static_cast<int64_t>(row.size()) > seq_len;
    int64_t* id = ids[i].data_ptr<int64_t>();
    int64_t* keep = mask[i].data_ptr<int64_t>();
    for (int64_t t = 0; t < used; ++t) {
      id[t] = row[static_cast<size_t>(t)];
      keep[t] = 1;
    }
    // A text with no tokens still gives the model one position to pool.
    if (used == 0) {
      keep[0] = 1;
      ++empty;
    }
  }
  if (cut > 0 || empty > 0) {
    TLOG_INFO << req.field << ": " << cut << " of " << n << " texts are longer than data.seq_len "
              << seq_len << " and were cut; " << empty << " are empty";
  }
  LoadedSet out;
  out.info.input_shape = {seq_len};
  out.info.integer_inputs = true;
  out.info.vocab_size = encoded.vocab_size;
  out.info.input_names = {"input_ids", "attention_mask"};
  torch::Tensor targets;
  if (req.task == Task::kRegression) {
    ASSIGN_OR_RETURN(std::vector<float> values, Values(rows, req));
    targets = torch::from_blob(values.data(), {n}, torch::kFloat32).clone();
  } else {
    ASSIGN_OR_RETURN(std::vector<int64_t> class_ids,
                     ClassIdsOf(rows.labels, rows.lines, req.class_names, req.field, req.path));
    targets = torch::from_blob(class_ids.data(), {n}, torch::kInt64).clone();
    // Named classes are as many as the training set names.
    out.info.num_classes = req.class_names.empty()
                               ? *std::max_element(class_ids.begin(), class_ids.end()) + 1
                               : static_cast<int64_t>(req.class_names.size());
  }
  out.data = std::make_shared<TensorDataset>(std::move(ids), std::move(targets), 0,
                                             NamedInputs{{"attention_mask", std::move(mask)}});
  return out;
}

absl::StatusOr<std::vector<std::string>> CsvTextTrainingClasses(const v1::DataSpec& data) {
  const std::string field = "data.train_path";
  ASSIGN_OR_RETURN(const std::vector<std::string> files, ResolveShards(field, data.train_path()));
  std::vector<std::string> labels;
  for (const std::string& path : files) {
    ASSIGN_OR_RETURN(const std::string file, ReadWholeFile(path, field));
    ASSIGN_OR_RETURN(CsvTextRows rows, ParseCsvTextRows(file, data, field, path));
    labels.insert(labels.end(), std::make_move_iterator(rows.labels.begin()),
                  std::make_move_iterator(rows.labels.end()));
  }
  return ClassNamesOf(labels, field);
}

}  // namespace trainctl::train
