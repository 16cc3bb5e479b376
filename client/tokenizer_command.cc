#include "client/tokenizer_command.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <istream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/format.h"
#include "client/json_text.h"
#include "common/csv_text_rows.h"
#include "common/data_shards.h"
#include "common/spec.h"
#include "common/tokenizer_client.h"

namespace trainctl::client {
namespace {

// What to train on: files of text lines, or CSV files' text column.
struct TrainingText {
  std::vector<std::string> files;
  std::string text_column;  // empty: the files are text
  bool header = false;
  char delimiter = ',';
  std::string where;  // how the inputs were named, for the summary
  std::string file_field = "input";  // what named the files, for errors
};

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(what, ": cannot open ", path));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat(what, ": cannot read ", path));
  return bytes.str();
}

// The training set of the job spec at `spec_path`: data.train_path's files
// (relative to the spec's directory, as `trainctl submit` reads them).
absl::StatusOr<TrainingText> FromSpec(const std::string& spec_path) {
  absl::StatusOr<std::string> text = ReadFile(spec_path, "--spec");
  if (!text.ok()) return text.status();
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(*text);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(spec_path, ": ", spec.status().message()));
  }
  const v1::DataSpec& d = spec->data();
  const bool csv_text = d.format() == "csv" && !d.text_column().empty();
  if (d.format() != "text" && !csv_text) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec_path, ": data.format ", d.format(),
        " has no text to train a tokenizer on (format text, or csv with data.text_column)"));
  }
  std::string path = d.train_path();
  if (!path.empty() && path[0] != '/') path = absl::StrCat(DirectoryOf(spec_path), "/", path);
  TrainingText out;
  absl::StatusOr<std::vector<std::string>> files = ResolveShards("data.train_path", path);
  if (!files.ok()) return files.status();
  out.files = *std::move(files);
  if (csv_text) {
    out.text_column = d.text_column();
    out.header = d.header();
    out.delimiter = d.delimiter().empty() ? ',' : d.delimiter()[0];
    out.file_field = "data.train_path";
  }
  out.where = absl::StrCat("the training set of ", spec_path);
  return out;
}

// The text column of every CSV file, as a records file for the trainer.
absl::StatusOr<int64_t> WriteColumnRecords(const TrainingText& t, const std::string& records) {
  v1::DataSpec csv;
  csv.set_text_column(t.text_column);
  csv.set_header(t.header);
  csv.set_delimiter(std::string(1, t.delimiter));
  std::vector<std::string> texts;
  for (const std::string& file : t.files) {
    absl::StatusOr<std::string> bytes = ReadFile(file, "tokenizer train");
    if (!bytes.ok()) return bytes.status();
    absl::StatusOr<CsvTextRows> rows =
        ParseCsvTextRows(*bytes, csv, t.file_field, file, 0, /*labels=*/false);
    if (!rows.ok()) return rows.status();
    texts.insert(texts.end(), std::make_move_iterator(rows->texts.begin()),
                 std::make_move_iterator(rows->texts.end()));
  }
  if (absl::Status written = WriteTextRecords(texts, records); !written.ok()) return written;
  return static_cast<int64_t>(texts.size());
}

int Train(const TokenizerArgs& args, std::ostream& out, std::ostream& err) {
  auto fail = [&](const absl::Status& why) {
    err << "trainctl: tokenizer train: " << why.message() << "\n";
    return absl::IsInvalidArgument(why) ? kExitUsage : kExitFailed;
  };
  TrainingText text;
  if (!args.spec.empty()) {
    if (!args.inputs.empty() || !args.text_column.empty()) {
      return fail(absl::InvalidArgumentError(
          "give input files or --spec, not both: --spec reads the job's training set"));
    }
    absl::StatusOr<TrainingText> from_spec = FromSpec(args.spec);
    if (!from_spec.ok()) return fail(from_spec.status());
    text = *std::move(from_spec);
  } else {
    if (args.inputs.empty()) {
      return fail(absl::InvalidArgumentError("name the text files to train on, or --spec JOB.yaml"));
    }
    if (args.delimiter.size() != 1) {
      return fail(absl::InvalidArgumentError("--delimiter must be exactly one character"));
    }
    text.files = args.inputs;
    text.text_column = args.text_column;
    text.header = args.header;
    text.delimiter = args.delimiter[0];
    text.where = absl::StrJoin(args.inputs, ", ");
  }
  // Scratch files beside the model, so the final rename stays on one filesystem.
  std::string scratch = absl::StrCat(args.out, ".tmp-XXXXXX");
  if (::mkdtemp(scratch.data()) == nullptr) {
    return fail(absl::FailedPreconditionError(
        absl::StrCat(args.out, ": cannot create a directory beside it: ", strerror(errno))));
  }
  const std::string model = scratch + "/model";
  const std::string records = scratch + "/texts.records";
  TokenizerTraining training;
  training.output = model;
  training.vocab_size = args.vocab_size;
  training.model_type = args.model_type;
  training.character_coverage = args.character_coverage;
  training.max_sentences = args.max_sentences;
  absl::StatusOr<TokenizerInfo> trained = absl::InternalError("not trained");
  int64_t rows = 0;
  if (!text.text_column.empty()) {
    absl::StatusOr<int64_t> written = WriteColumnRecords(text, records);
    if (written.ok()) {
      rows = *written;
      training.inputs = {records};
      training.records = true;
      trained = TrainTokenizer(training);
    } else {
      trained = written.status();
    }
  } else {
    training.inputs = text.files;
    trained = TrainTokenizer(training);
  }
  const bool renamed = trained.ok() && ::rename(model.c_str(), args.out.c_str()) == 0;
  const int rename_errno = errno;
  ::unlink(model.c_str());
  ::unlink(records.c_str());
  ::rmdir(scratch.c_str());
  if (!trained.ok()) return fail(trained.status());
  if (!renamed) {
    return fail(absl::FailedPreconditionError(
        absl::StrCat(args.out, ": cannot write: ", strerror(rename_errno))));
  }
  if (args.json) {
    out << "{\"file\":" << JsonString(args.out) << ",\"pieces\":" << trained->pieces
        << ",\"model_type\":" << JsonString(args.model_type);
    if (rows > 0) out << ",\"texts\":" << rows;
    out << ",\"unk_id\":" << trained->unk_id << ",\"bos_id\":" << trained->bos_id
        << ",\"eos_id\":" << trained->eos_id << ",\"pad_id\":" << trained->pad_id << "}\n";
    return kExitOk;
  }
  out << "wrote " << args.out << ": " << trained->pieces << " pieces (" << args.model_type
      << ") from " << text.where;
  if (rows > 0) out << " (" << rows << " texts of column " << text.text_column << ")";
  out << "\nids: <unk> " << trained->unk_id << ", <s> " << trained->bos_id << ", </s> "
      << trained->eos_id << ", <pad> " << trained->pad_id
      << "\nuse it as data.tokenizer: " << args.out << "\n";
  return kExitOk;
}

int Encode(const TokenizerArgs& args, std::istream& in, std::ostream& out, std::ostream& err) {
  std::vector<std::string> texts = args.texts;
  if (texts.empty()) {
    for (std::string line; std::getline(in, line);) texts.push_back(line);
  }
  absl::StatusOr<std::vector<std::vector<int32_t>>> ids = EncodeTexts(args.model, "MODEL", texts);
  if (!ids.ok()) {
    err << "trainctl: tokenizer encode: " << ids.status().message() << "\n";
    return absl::IsInvalidArgument(ids.status()) ? kExitUsage : kExitFailed;
  }
  for (const std::vector<int32_t>& row : *ids) {
    if (args.json) {
      out << "{\"ids\":[" << absl::StrJoin(row, ",") << "]}\n";
    } else {
      out << absl::StrJoin(row, " ") << "\n";
    }
  }
  return kExitOk;
}

}  // namespace

CLI::App* AddTokenizerCommand(CLI::App& app, TokenizerArgs* args) {
  CLI::App* command = app.add_subcommand(
      "tokenizer", "Train a SentencePiece model for data.tokenizer, or see how one encodes text");
  command->require_subcommand(1);
  args->train = command->add_subcommand(
      "train", "Train a SentencePiece model on text files, CSV text columns or a job's "
               "training set");
  args->train->add_option("FILES", args->inputs,
                          "Text files (one sentence a line), or CSV files with --text-column");
  args->train->add_option("--spec", args->spec,
                          "Train on this job spec's training set (data.format text, or csv "
                          "with data.text_column), as its ranks will read it");
  args->train->add_option("--text-column", args->text_column,
                          "CSV inputs: the column of text (header name or 0-based index)");
  args->train->add_flag("--header", args->header, "CSV inputs: the first row names the columns");
  args->train->add_option("--delimiter", args->delimiter, "CSV inputs: one character (default ,)");
  args->train->add_option("-o,--file", args->out, "The model file to write")->required();
  args->train->add_option("--vocab-size", args->vocab_size, "Pieces in the vocabulary")
      ->check(CLI::Range(int64_t{8}, int64_t{1} << 20));
  args->train->add_option("--model-type", args->model_type, "unigram | bpe | char | word")
      ->check(CLI::IsMember({"unigram", "bpe", "char", "word"}));
  args->train->add_option("--character-coverage", args->character_coverage,
                          "Share of characters the vocabulary covers (0.9995; 1 for small "
                          "alphabets)")
      ->check(CLI::Range(0.9, 1.0));
  args->train->add_option("--max-sentences", args->max_sentences,
                          "Sentences sampled from larger inputs (1000000)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  args->train->footer(
      "\nIds: <unk> 0, <s> 1, </s> 2, <pad> 3. Text lines are encoded each ended by </s>.\n"
      "\nExamples:\n"
      "  trainctl tokenizer train corpus.txt --vocab-size 8000 -o spm.model\n"
      "  trainctl tokenizer train reviews.csv --header --text-column review -o spm.model\n"
      "  trainctl tokenizer train --spec job.yaml --vocab-size 4000 -o spm.model");
  args->encode = command->add_subcommand("encode", "Print the ids a model gives each text");
  args->encode->add_option("MODEL", args->model, "A SentencePiece model file")->required();
  args->encode->add_option("TEXTS", args->texts, "Texts to encode (none: each line of stdin)");
  args->encode->footer("\nExample:\n  trainctl tokenizer encode spm.model \"hello world\"");
  return command;
}

int CmdTokenizer(const TokenizerArgs& args, std::istream& in, std::ostream& out,
                 std::ostream& err) {
  if (args.train->parsed()) return Train(args, out, err);
  return Encode(args, in, out, err);
}

}  // namespace trainctl::client
