// formats tokens and text: next-token windows over one flat token stream.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/train/data/in_memory.h"
#include "worker/train/data/readers.h"

namespace trainctl::train {
namespace {

// How many tokens to keep: enough for `limit` windows (0 = all), or an
// error when there is not even one window.
absl::StatusOr<int64_t> KeptTokens(const ReadRequest& req, int64_t count,
                                   int64_t seq_len, const char* unit) {
  if (count < seq_len + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        req.field, ": ", req.path, ": ", count, " ", unit,
        " is too few for one window of seq_len ", seq_len, " + 1"));
  }
  if (req.limit > 0 && req.limit < (count - 1) / seq_len) {
    return req.limit * seq_len + 1;
  }
  return count;
}

LoadedSet Windows(torch::Tensor tokens, int64_t seq_len, int64_t vocab) {
  LoadedSet out;
  out.info.input_shape = {seq_len};
  out.info.integer_inputs = true;
  out.info.vocab_size = vocab;
  out.data = std::make_shared<TokenWindowDataset>(std::move(tokens), seq_len);
  return out;
}

}  // namespace

absl::StatusOr<LoadedSet> ReadTokens(const ReadRequest& req,
                                     const v1::DataSpec& data) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadWholeFile(req.path, req.field));
  const bool wide = data.token_dtype() == "uint32";
  const int64_t width = wide ? 4 : 2;
  const int64_t size = static_cast<int64_t>(bytes.size());
  if (size % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        req.field, ": ", req.path, ": ", size, " bytes is not a multiple of ",
        width, " (token_dtype ", wide ? "uint32" : "uint16", ")"));
  }
  const int64_t seq_len = data.seq_len();
  ASSIGN_OR_RETURN(const int64_t n,
                   KeptTokens(req, size / width, seq_len, "tokens"));
  // int32 halves the memory of int64; ids past 2^31 are not a real vocabulary.
  torch::Tensor tokens = torch::empty({n}, torch::kInt32);
  int32_t* dst = tokens.data_ptr<int32_t>();
  const auto* src = reinterpret_cast<const unsigned char*>(bytes.data());
  uint32_t max_id = 0;
  for (int64_t i = 0; i < n; ++i) {
    const unsigned char* p = src + i * width;
    uint32_t id = uint32_t{p[0]} | (uint32_t{p[1]} << 8);
    if (wide) id |= (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
    if (id > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
      // Its index only: the id is 4 bytes of the file (security review C1).
      return absl::InvalidArgumentError(
          absl::StrCat(req.field, ": ", req.path, ": token ", i,
                       " (byte offset ", i * width,
                       ") has an id over the supported maximum 2^31-1"));
    }
    dst[i] = static_cast<int32_t>(id);
    max_id = std::max(max_id, id);
  }
  return Windows(std::move(tokens), seq_len, int64_t{max_id} + 1);
}

absl::StatusOr<LoadedSet> ReadText(const ReadRequest& req,
                                   const v1::DataSpec& data) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadWholeFile(req.path, req.field));
  const int64_t seq_len = data.seq_len();
  ASSIGN_OR_RETURN(
      const int64_t n,
      KeptTokens(req, static_cast<int64_t>(bytes.size()), seq_len, "bytes"));
  // Bytes stay uint8 in memory; Gather widens the selected windows to int64.
  torch::Tensor tokens = torch::empty({n}, torch::kUInt8);
  std::memcpy(tokens.data_ptr<uint8_t>(), bytes.data(), n);
  return Windows(std::move(tokens), seq_len, 256);
}

}  // namespace trainctl::train
