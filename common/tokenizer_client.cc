#include "common/tokenizer_client.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/helper_process.h"
#include "common/status_macros.h"

namespace trainctl {
namespace {

constexpr char kProgram[] = "trainctl-tokenizer";
constexpr char kReasonPrefix[] = "trainctl-tokenizer: ";

// The helper's own reason (its last line saying why), else its exit.
std::string ReasonOf(const ChildResult& ran) {
  if (ran.timed_out) return "did not finish in time";
  std::string reason;
  for (absl::string_view line : absl::StrSplit(ran.output, '\n')) {
    if (absl::ConsumePrefix(&line, kReasonPrefix)) reason = std::string(line);
  }
  if (!reason.empty()) return reason;
  return ran.exit_code < 0 ? absl::StrCat(kProgram, " was killed by signal ", -ran.exit_code)
                           : absl::StrCat(kProgram, " failed (exit ", ran.exit_code, ")");
}

// Runs the helper with `args`; its stdout's `key value` lines on success.
absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> Run(
    const std::vector<std::string>& args, absl::Time deadline, const std::string& field,
    const std::vector<int>& pass_fds = {}) {
  ASSIGN_OR_RETURN(const std::string program, FindTokenizerProgram());
  std::vector<std::string> argv = {program};
  argv.insert(argv.end(), args.begin(), args.end());
  ASSIGN_OR_RETURN(const ChildResult ran,
                   RunChild(argv, deadline, /*separate_stdout=*/true, pass_fds));
  if (ran.timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat(field, ": tokenizing did not finish in time"));
  }
  if (ran.exit_code != 0) {
    return absl::InvalidArgumentError(
        field.empty() ? ReasonOf(ran) : absl::StrCat(field, ": ", ReasonOf(ran)));
  }
  std::vector<std::pair<std::string, int64_t>> values;
  for (absl::string_view line : absl::StrSplit(ran.stdout_text, '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits(' ', 1));
    int64_t v = 0;
    if (!absl::SimpleAtoi(kv.second, &v)) {
      return absl::InternalError(absl::StrCat(kProgram, " printed an unexpected line"));
    }
    values.emplace_back(kv.first, v);
  }
  return values;
}

int64_t Value(const std::vector<std::pair<std::string, int64_t>>& values, const std::string& key,
              int64_t otherwise) {
  for (const auto& [k, v] : values) {
    if (k == key) return v;
  }
  return otherwise;
}

TokenizerInfo InfoOf(const std::vector<std::pair<std::string, int64_t>>& values) {
  TokenizerInfo info;
  info.pieces = Value(values, "pieces", 0);
  info.unk_id = Value(values, "unk", -1);
  info.bos_id = Value(values, "bos", -1);
  info.eos_id = Value(values, "eos", -1);
  info.pad_id = Value(values, "pad", -1);
  return info;
}

bool PutU32(std::FILE* out, uint32_t v) {
  const unsigned char b[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                              static_cast<unsigned char>(v >> 16),
                              static_cast<unsigned char>(v >> 24)};
  return std::fwrite(b, 1, 4, out) == 4;
}

uint32_t U32At(const std::string& bytes, size_t at) {
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data() + at);
  return b[0] | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 24);
}

// An anonymous file in memory (memfd), closed on scope exit.
class MemoryFile {
 public:
  explicit MemoryFile(const char* name) : fd_(::memfd_create(name, MFD_CLOEXEC)) {}
  ~MemoryFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

// The whole contents of the open file `fd`, from its start.
bool ReadAllFrom(int fd, std::string* out) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return false;
  out->assign(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < out->size()) {
    const ssize_t n = ::pread(fd, out->data() + done, out->size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> FindTokenizerProgram() {
  const char* set = getenv("TRAINCTL_TOKENIZER");
  if (set != nullptr && *set != '\0') return std::string(set);
  std::string found = FindSiblingProgram(kProgram);
  if (found.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        kProgram, " is neither beside this program nor on PATH; SentencePiece runs in it "
                  "(install trainctl's package, or build the target trainctl-tokenizer)"));
  }
  return found;
}

absl::StatusOr<TokenizerInfo> ReadTokenizerInfo(const std::string& model,
                                                const std::string& field, absl::Time deadline) {
  ASSIGN_OR_RETURN(const auto values, Run({"info", model}, deadline, field));
  TokenizerInfo info = InfoOf(values);
  if (info.pieces <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", model, ": has no pieces"));
  }
  return info;
}

absl::StatusOr<int64_t> EncodeTextLines(const std::string& model, const std::string& model_field,
                                        const std::string& text, const std::string& text_field,
                                        int out_fd, absl::Time deadline) {
  absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> values =
      Run({"encode-lines", model, text, "/dev/fd/3"}, deadline, text_field, {out_fd});
  if (!values.ok()) {
    // The helper names the file at fault first; a model's fault is the model field's.
    std::string message(values.status().message());
    if (absl::StartsWith(message, absl::StrCat(text_field, ": ", model, ":"))) {
      message.replace(0, text_field.size(), model_field);
    }
    return absl::Status(values.status().code(), message);
  }
  return Value(*values, "tokens", 0);
}

// Writes `texts` as records to `out`.
bool PutRecords(const std::vector<std::string>& texts, std::FILE* out) {
  bool ok = true;
  for (const std::string& text : texts) {
    ok = ok && text.size() <= UINT32_MAX && PutU32(out, static_cast<uint32_t>(text.size())) &&
         std::fwrite(text.data(), 1, text.size(), out) == text.size();
  }
  return std::fflush(out) == 0 && ok;
}

absl::Status WriteTextRecords(const std::vector<std::string>& texts, const std::string& path) {
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr) {
    return absl::InternalError(absl::StrCat(path, ": cannot create: ", strerror(errno)));
  }
  bool ok = PutRecords(texts, out);
  ok = std::fclose(out) == 0 && ok;
  if (!ok) return absl::InternalError(absl::StrCat(path, ": cannot write: ", strerror(errno)));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<int32_t>>> EncodeTexts(
    const std::string& model, const std::string& model_field,
    const std::vector<std::string>& texts) {
  MemoryFile records("trainctl-texts"), ids("trainctl-ids");
  if (records.fd() < 0 || ids.fd() < 0) {
    return absl::InternalError(absl::StrCat("memfd_create: ", strerror(errno)));
  }
  {
    std::FILE* out = ::fdopen(::dup(records.fd()), "wb");
    const bool written = out != nullptr && PutRecords(texts, out);
    if (out != nullptr) std::fclose(out);
    if (!written) {
      return absl::InternalError(absl::StrCat("writing texts to tokenize: ", strerror(errno)));
    }
  }
  RETURN_IF_ERROR(Run({"encode-records", model, "/dev/fd/3", "/dev/fd/4"},
                      absl::InfiniteFuture(), model_field, {records.fd(), ids.fd()})
                      .status());
  std::string bytes;
  if (!ReadAllFrom(ids.fd(), &bytes)) {
    return absl::InternalError(absl::StrCat("reading token ids: ", strerror(errno)));
  }
  std::vector<std::vector<int32_t>> encoded;
  encoded.reserve(texts.size());
  size_t at = 0;
  while (at + 4 <= bytes.size() && encoded.size() < texts.size()) {
    const uint32_t count = U32At(bytes, at);
    at += 4;
    if (bytes.size() - at < size_t{count} * 4) break;
    std::vector<int32_t>& row = encoded.emplace_back(count);
    for (uint32_t i = 0; i < count; ++i, at += 4) row[i] = static_cast<int32_t>(U32At(bytes, at));
  }
  if (encoded.size() != texts.size() || at != bytes.size()) {
    return absl::InternalError(absl::StrCat(kProgram, " wrote ", encoded.size(),
                                            " encoded texts of ", texts.size()));
  }
  return encoded;
}

absl::StatusOr<TokenizerInfo> TrainTokenizer(const TokenizerTraining& t) {
  std::vector<std::string> args = {"train", absl::StrCat("--output=", t.output),
                                   absl::StrCat("--vocab-size=", t.vocab_size),
                                   absl::StrCat("--model-type=", t.model_type),
                                   absl::StrCat("--character-coverage=", t.character_coverage),
                                   absl::StrCat("--max-sentences=", t.max_sentences)};
  if (t.records) args.push_back("--records");
  args.insert(args.end(), t.inputs.begin(), t.inputs.end());
  ASSIGN_OR_RETURN(const auto values, Run(args, absl::InfiniteFuture(), ""));
  return InfoOf(values);
}

}  // namespace trainctl
