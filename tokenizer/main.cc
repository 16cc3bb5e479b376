// trainctl-tokenizer: the one trainctl process that loads SentencePiece.
//
// Debian's libsentencepiece carries its own copies of protobuf and parts of
// Abseil and links neither; loaded into a rank, the CLI or the agent (which
// link libprotobuf 3.21 and Debian's Abseil) one copy would bind to the
// other's symbols. So the rank, the agent's data probe and `trainctl
// tokenizer` run this program (common/tokenizer_client.h) and exchange
// files with it. It includes no Abseil header and links nothing of ours.
//
//   trainctl-tokenizer info MODEL
//   trainctl-tokenizer encode-lines MODEL TEXT OUT
//   trainctl-tokenizer encode-records MODEL RECORDS OUT
//   trainctl-tokenizer train --output=MODEL --vocab-size=N
//       [--model-type=unigram|bpe|char|word] [--character-coverage=X]
//       [--max-sentences=N] [--records] INPUT...
//
// Files: ids are uint32 little-endian. encode-lines writes each line's ids
// (lines split at \n, a trailing \r dropped, empty lines skipped), each
// followed by the model's end-of-sentence id when it has one. A records
// file is, per record, a uint32 byte length and the bytes; encode-records
// writes, per record, a uint32 id count and the ids. Results are printed as
// `key value` lines on stdout. On failure the last line on stderr is
// "trainctl-tokenizer: " and the reason, which never quotes input text:
// inputs are users' data files.

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace sentencepiece::logging {
// In the library, not its headers: keeps training's progress log quiet.
void SetMinLogLevel(int level);
}  // namespace sentencepiece::logging

namespace {

constexpr char kUsage[] =
    "usage: trainctl-tokenizer info MODEL\n"
    "       trainctl-tokenizer encode-lines MODEL TEXT OUT\n"
    "       trainctl-tokenizer encode-records MODEL RECORDS OUT\n"
    "       trainctl-tokenizer train --output=MODEL --vocab-size=N "
    "[--model-type=unigram|bpe|char|word] [--character-coverage=X] "
    "[--max-sentences=N] [--records] INPUT...\n";

// SentencePiece's reason without the source location and failed check it
// starts with ("./src/x.cc(12) [cond] reason"); empty when that is all.
std::string Reason(const sentencepiece::util::Status& status) {
  std::string message = status.error_message();
  const size_t check_end = message.rfind("] ");
  if (message.rfind("./src/", 0) == 0 && check_end != std::string::npos) {
    message = message.substr(check_end + 2);
  } else if (message.rfind("./src/", 0) == 0) {
    message.clear();
  }
  while (!message.empty() && message.back() == ' ') message.pop_back();
  return message;
}

// " (reason)" when SentencePiece gave one.
std::string Because(const sentencepiece::util::Status& status) {
  const std::string reason = Reason(status);
  return reason.empty() ? "" : " (" + reason + ")";
}

int Fail(const std::string& why) {
  std::cerr << "trainctl-tokenizer: " << why << "\n";
  return 1;
}

bool PutU32(std::FILE* out, uint32_t v) {
  const unsigned char b[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                              static_cast<unsigned char>(v >> 16),
                              static_cast<unsigned char>(v >> 24)};
  return std::fwrite(b, 1, 4, out) == 4;
}

bool GetU32(std::FILE* in, uint32_t* v) {
  unsigned char b[4];
  if (std::fread(b, 1, 4, in) != 4) return false;
  *v = b[0] | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 24);
  return true;
}

// Closes an output file and says whether everything reached it.
bool Finish(std::FILE* out) {
  const bool flushed = std::fflush(out) == 0 && !std::ferror(out);
  return std::fclose(out) == 0 && flushed;
}

// The model at `path`, or the reason it cannot be loaded.
std::unique_ptr<sentencepiece::SentencePieceProcessor> LoadModel(const std::string& path,
                                                                 std::string* why) {
  auto model = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const sentencepiece::util::Status loaded = model->Load(path);
  if (!loaded.ok()) {
    // SentencePiece's reasons name the file or the proto, never its bytes.
    *why = path + ": is not a SentencePiece model" + Because(loaded);
    return nullptr;
  }
  return model;
}

int Info(const std::string& model_path) {
  std::string why;
  auto model = LoadModel(model_path, &why);
  if (!model) return Fail(why);
  std::cout << "pieces " << model->GetPieceSize() << "\nunk " << model->unk_id() << "\nbos "
            << model->bos_id() << "\neos " << model->eos_id() << "\npad " << model->pad_id()
            << "\n";
  return 0;
}

// Appends `ids` to `out` as uint32.
bool WriteIds(std::FILE* out, const std::vector<int>& ids) {
  for (int id : ids) {
    if (!PutU32(out, static_cast<uint32_t>(id))) return false;
  }
  return true;
}

int EncodeLines(const std::string& model_path, const std::string& text_path,
                const std::string& out_path) {
  std::string why;
  auto model = LoadModel(model_path, &why);
  if (!model) return Fail(why);
  std::ifstream text(text_path, std::ios::binary);
  if (!text) return Fail(text_path + ": cannot open: " + std::strerror(errno));
  std::FILE* out = std::fopen(out_path.c_str(), "wb");
  if (out == nullptr) return Fail(out_path + ": cannot create: " + std::strerror(errno));
  const int eos = model->eos_id();
  std::string line;
  std::vector<int> ids;
  int64_t tokens = 0, lines = 0, line_no = 0;
  while (std::getline(text, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const sentencepiece::util::Status encoded = model->Encode(line, &ids);
    if (!encoded.ok()) {
      std::fclose(out);
      return Fail(text_path + ":" + std::to_string(line_no) + ": cannot be encoded" +
                  Because(encoded));
    }
    if (eos >= 0) ids.push_back(eos);
    if (!WriteIds(out, ids)) {
      std::fclose(out);
      return Fail(out_path + ": cannot write: " + std::strerror(errno));
    }
    tokens += static_cast<int64_t>(ids.size());
    ++lines;
  }
  if (text.bad()) {
    std::fclose(out);
    return Fail(text_path + ": cannot read: " + std::strerror(errno));
  }
  if (!Finish(out)) return Fail(out_path + ": cannot write: " + std::strerror(errno));
  std::cout << "tokens " << tokens << "\nlines " << lines << "\n";
  return 0;
}

// Reads one record of a records file; false at its end, `*bad` on a torn one.
bool NextRecord(std::FILE* in, std::string* record, bool* bad) {
  uint32_t size = 0;
  if (!GetU32(in, &size)) return false;
  record->resize(size);
  if (size > 0 && std::fread(record->data(), 1, size, in) != size) {
    *bad = true;
    return false;
  }
  return true;
}

int EncodeRecords(const std::string& model_path, const std::string& records_path,
                  const std::string& out_path) {
  std::string why;
  auto model = LoadModel(model_path, &why);
  if (!model) return Fail(why);
  std::FILE* in = std::fopen(records_path.c_str(), "rb");
  if (in == nullptr) return Fail(records_path + ": cannot open: " + std::strerror(errno));
  std::FILE* out = std::fopen(out_path.c_str(), "wb");
  if (out == nullptr) {
    std::fclose(in);
    return Fail(out_path + ": cannot create: " + std::strerror(errno));
  }
  std::string record;
  std::vector<int> ids;
  int64_t records = 0, tokens = 0;
  bool bad = false;
  while (NextRecord(in, &record, &bad)) {
    const sentencepiece::util::Status encoded = model->Encode(record, &ids);
    if (!encoded.ok()) {
      std::fclose(in);
      std::fclose(out);
      return Fail("record " + std::to_string(records) + " cannot be encoded" + Because(encoded));
    }
    if (!PutU32(out, static_cast<uint32_t>(ids.size())) || !WriteIds(out, ids)) {
      std::fclose(in);
      std::fclose(out);
      return Fail(out_path + ": cannot write: " + std::strerror(errno));
    }
    ++records;
    tokens += static_cast<int64_t>(ids.size());
  }
  std::fclose(in);
  if (bad) {
    std::fclose(out);
    return Fail(records_path + ": ends inside record " + std::to_string(records));
  }
  if (!Finish(out)) return Fail(out_path + ": cannot write: " + std::strerror(errno));
  std::cout << "records " << records << "\ntokens " << tokens << "\n";
  return 0;
}

// Reads one line of `in` into `line` (\n dropped, and a \r before it);
// false at the end of the file.
bool NextLine(std::FILE* in, std::string* line) {
  line->clear();
  int c = 0;
  while ((c = std::fgetc(in)) != EOF && c != '\n') line->push_back(static_cast<char>(c));
  if (c == EOF && line->empty()) return false;
  if (!line->empty() && line->back() == '\r') line->pop_back();
  return true;
}

// Training sentences, one file after another: the non-empty lines of text
// files, or the records of records files (CSV text columns, whose cells
// may hold newlines). Read here rather than by SentencePiece's own reader,
// which splits its input list at commas, so any file name will do.
class SentencesIterator : public sentencepiece::SentenceIterator {
 public:
  SentencesIterator(std::vector<std::string> paths, bool records)
      : paths_(std::move(paths)), records_(records) {
    Next();
  }
  ~SentencesIterator() override {
    if (in_ != nullptr) std::fclose(in_);
  }
  bool done() const override { return done_; }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return status_; }
  int64_t count() const { return count_; }
  void Next() override {
    while (!done_) {
      if (in_ == nullptr) {
        if (next_ == paths_.size()) {
          done_ = true;
          return;
        }
        in_ = std::fopen(paths_[next_].c_str(), "rb");
        if (in_ == nullptr) return Stop(paths_[next_] + ": cannot open");
        ++next_;
      }
      bool bad = false;
      if (records_ ? NextRecord(in_, &value_, &bad) : NextLine(in_, &value_)) {
        if (records_ || !value_.empty()) {
          ++count_;
          return;
        }
        continue;
      }
      std::fclose(in_);
      in_ = nullptr;
      if (bad) return Stop(paths_[next_ - 1] + ": ends inside a record");
    }
  }

 private:
  void Stop(const std::string& why) {
    status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kInternal, why);
    done_ = true;
  }

  std::vector<std::string> paths_;
  bool records_;
  int64_t count_ = 0;  // sentences read so far
  size_t next_ = 0;
  std::FILE* in_ = nullptr;
  std::string value_;
  bool done_ = false;
  sentencepiece::util::Status status_;
};

int Train(const std::vector<std::string>& args) {
  std::map<std::string, std::string> flags = {{"model-type", "unigram"},
                                              {"character-coverage", "0.9995"},
                                              {"max-sentences", "1000000"}};
  bool records = false;
  std::vector<std::string> inputs;
  for (const std::string& arg : args) {
    if (arg == "--records") {
      records = true;
    } else if (arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos) {
      const size_t eq = arg.find('=');
      const std::string key = arg.substr(2, eq - 2);
      if (!flags.count(key) && key != "output" && key != "vocab-size") {
        return Fail("unknown option --" + key);
      }
      flags[key] = arg.substr(eq + 1);
    } else {
      inputs.push_back(arg);
    }
  }
  if (!flags.count("output") || !flags.count("vocab-size") || inputs.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  // What `spm_train` calls these; the rest are SentencePiece's defaults
  // (ids: <unk> 0, <s> 1, </s> 2), plus a padding id for classifiers, and
  // sentences up to 64 KiB (its default skips any over 4192 bytes, which a
  // CSV text cell easily is).
  std::unordered_map<std::string, std::string> kwargs = {
      {"vocab_size", flags["vocab-size"]},
      {"model_type", flags["model-type"]},
      {"character_coverage", flags["character-coverage"]},
      {"input_sentence_size", flags["max-sentences"]},
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", "65536"},
      {"pad_id", "3"},
      {"model_prefix", ""}};
  sentencepiece::logging::SetMinLogLevel(2);
  SentencesIterator sentences(inputs, records);
  std::string model;
  const sentencepiece::util::Status trained =
      sentencepiece::SentencePieceTrainer::Train(kwargs, &sentences, &model);
  if (!trained.ok() && sentences.status().ok() && sentences.count() == 0) {
    return Fail("training failed: the inputs hold no text");
  }
  if (!trained.ok()) {
    const std::string reason = Reason(trained);
    return Fail("training failed" + (reason.empty() ? "" : ": " + reason));
  }
  const std::string& out_path = flags["output"];
  std::FILE* out = std::fopen(out_path.c_str(), "wb");
  if (out == nullptr) return Fail(out_path + ": cannot create: " + std::strerror(errno));
  if (std::fwrite(model.data(), 1, model.size(), out) != model.size()) {
    std::fclose(out);
    return Fail(out_path + ": cannot write: " + std::strerror(errno));
  }
  if (!Finish(out)) return Fail(out_path + ": cannot write: " + std::strerror(errno));
  sentencepiece::SentencePieceProcessor check;
  if (!check.LoadFromSerializedProto(model).ok()) return Fail("the trained model does not load");
  std::cout << "pieces " << check.GetPieceSize() << "\nunk " << check.unk_id() << "\nbos "
            << check.bos_id() << "\neos " << check.eos_id() << "\npad " << check.pad_id()
            << "\nbytes " << model.size() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << kUsage;
    return 0;
  }
  if (args.size() == 2 && args[0] == "info") return Info(args[1]);
  if (args.size() == 4 && args[0] == "encode-lines") return EncodeLines(args[1], args[2], args[3]);
  if (args.size() == 4 && args[0] == "encode-records") {
    return EncodeRecords(args[1], args[2], args[3]);
  }
  if (!args.empty() && args[0] == "train") {
    return Train(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  std::cerr << kUsage;
  return 2;
}
