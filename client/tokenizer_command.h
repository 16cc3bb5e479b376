#pragma once

// `trainctl tokenizer train` and `trainctl tokenizer encode`: SentencePiece
// models for data.tokenizer, trained from text files, CSV text columns or
// a job spec's own training set, and a look at how a model splits a text.
// Runs on this machine through trainctl-tokenizer (common/tokenizer_client.h);
// no coordinator is asked.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace trainctl::client {

struct TokenizerArgs {
  CLI::App* train = nullptr;
  CLI::App* encode = nullptr;
  // train
  std::vector<std::string> inputs;  // text files, or CSV files with text_column
  std::string spec;                 // a job spec whose training set to read instead
  std::string text_column;          // CSV inputs: the column of text
  bool header = false;
  std::string delimiter = ",";
  std::string out;
  int64_t vocab_size = 8000;
  std::string model_type = "unigram";
  double character_coverage = 0.9995;
  int64_t max_sentences = 1000000;
  bool json = false;  // -o json: one JSON object (train), one a text (encode)
  // encode
  std::string model;
  std::vector<std::string> texts;  // none: stdin's lines
};

// Adds `tokenizer` with its `train` and `encode` subcommands.
CLI::App* AddTokenizerCommand(CLI::App& app, TokenizerArgs* args);

int CmdTokenizer(const TokenizerArgs& args, std::istream& in, std::ostream& out,
                 std::ostream& err);

}  // namespace trainctl::client
