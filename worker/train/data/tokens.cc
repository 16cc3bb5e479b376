// formats tokens and text: next-token windows over one flat token file,
// read as batches need them (token_file.h). Text with data.tokenizer is
// first encoded into such a file of its own, which has no name.

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tokenizer_client.h"
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

// A file in `dir` with no name (O_TMPFILE, else named and unlinked at
// once), read and written through the returned descriptor: nothing is left
// on disk however the rank ends. -1 with errno set when it cannot be made.
int AnonymousFile(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
  std::string path = dir + "/trainctl-tokens-XXXXXX";
  fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd >= 0) ::unlink(path.c_str());
  return fd;
}

// The windows of `req`'s text as data.tokenizer's ids, encoded by
// trainctl-tokenizer into an anonymous file that the windows then read.
absl::StatusOr<LoadedSet> TokenizedTextWindows(const ReadRequest& req, const v1::DataSpec& data) {
  const std::string& model = data.tokenizer();
  ASSIGN_OR_RETURN(const TokenizerInfo info, ReadTokenizerInfo(model, "data.tokenizer"));
  const int fd = AnonymousFile(req.scratch_dir);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat(req.scratch_dir, ": cannot create a file for ",
                                            req.field, "'s token ids: ", strerror(errno)));
  }
  struct CloseFd {
    int fd;
    ~CloseFd() { ::close(fd); }
  } close_fd{fd};
  ASSIGN_OR_RETURN(const int64_t tokens,
                   EncodeTextLines(model, "data.tokenizer", req.path, req.field, fd));
  const int64_t seq_len = data.seq_len();
  if (tokens < seq_len + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        req.field, ": ", req.path, ": ", tokens, " tokens (data.tokenizer's) is too few for one "
        "window of seq_len ", seq_len, " + 1"));
  }
  TokenFileDataset::Options options;
  // The dataset opens its own descriptor of the same (nameless) file.
  options.path = absl::StrCat("/proc/self/fd/", fd);
  options.field = req.field;
  options.width = 4;
  options.seq_len = seq_len;
  options.windows = req.limit;
  return TokenWindowSet(req, std::move(options), info.pieces);
}

}  // namespace

absl::StatusOr<LoadedSet> TokenWindowSet(const ReadRequest& req,
                                         TokenFileDataset::Options options,
                                         int64_t known_vocab) {
  const int64_t seq_len = options.seq_len;
  const bool bytes = options.width == 1;
  ASSIGN_OR_RETURN(std::shared_ptr<TokenFileDataset> data,
                   TokenFileDataset::Open(std::move(options)));
  LoadedSet out;
  out.info.input_shape = {seq_len};
  out.info.integer_inputs = true;
  if (bytes) {
    out.info.vocab_size = 256;  // text: the bytes are the tokens
  } else if (known_vocab > 0) {
    data->CheckIdsBelow(known_vocab);
    out.info.vocab_size = known_vocab;
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
  if (!data.tokenizer().empty()) return TokenizedTextWindows(req, data);
  return Windows(req, 1, data.seq_len());
}

}  // namespace trainctl::train
