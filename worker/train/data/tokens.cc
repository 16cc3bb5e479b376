// formats tokens and text: next-token windows over one flat token file,
// read as batches need them (token_file.h).

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/train/data/readers.h"
#include "worker/train/data/token_file.h"

namespace trainctl::train {
namespace {

absl::StatusOr<LoadedSet> Windows(const ReadRequest& req, int width,
                                  int64_t seq_len) {
  TokenFileDataset::Options options;
  options.path = req.path;
  options.field = req.field;
  options.width = width;
  options.seq_len = seq_len;
  options.windows = req.limit;
  return TokenWindowSet(req, std::move(options));
}

}  // namespace

absl::StatusOr<LoadedSet> TokenWindowSet(const ReadRequest& req,
                                         TokenFileDataset::Options options) {
  const int64_t seq_len = options.seq_len;
  const bool bytes = options.width == 1;
  ASSIGN_OR_RETURN(std::shared_ptr<TokenFileDataset> data,
                   TokenFileDataset::Open(std::move(options)));
  LoadedSet out;
  out.info.input_shape = {seq_len};
  out.info.integer_inputs = true;
  if (bytes) {
    out.info.vocab_size = 256;  // text: the bytes are the tokens
  } else if (req.vocab_from_declaration) {
    data->CheckIdsBelow(req.vocab_size);
    out.info.vocab_size = req.vocab_size;
  } else {
    ASSIGN_OR_RETURN(const int64_t max_id, data->MaxId());
    out.info.vocab_size = max_id + 1;
  }
  out.data = std::move(data);
  return out;
}

absl::StatusOr<LoadedSet> ReadTokens(const ReadRequest& req,
                                     const v1::DataSpec& data) {
  return Windows(req, data.token_dtype() == "uint32" ? 4 : 2, data.seq_len());
}

absl::StatusOr<LoadedSet> ReadText(const ReadRequest& req,
                                   const v1::DataSpec& data) {
  return Windows(req, 1, data.seq_len());
}

}  // namespace trainctl::train
