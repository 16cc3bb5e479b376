#include "worker/train/export_main.h"

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "worker/train/model_export.h"
#include "worker/train/train_state.h"

namespace trainctl::train {
namespace {

struct ExportArgs {
  std::string checkpoint;
  std::string out;
  std::string format;
  std::string torchscript_module;
  std::vector<std::string> meta;  // KEY=VALUE
};

absl::Status Export(const ExportArgs& args) {
  absl::StatusOr<std::string> bytes = ReadWholeFile(args.checkpoint);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(),
                        absl::StrCat("checkpoint ", args.checkpoint, ": ",
                                     bytes.status().message()));
  }
  absl::StatusOr<CheckpointModel> model = DecodeCheckpointModel(*bytes);
  if (!model.ok()) {
    return absl::Status(model.status().code(),
                        absl::StrCat("checkpoint ", args.checkpoint, ": ",
                                     model.status().message()));
  }
  if (args.format == "torchscript") {
    return SaveTorchScriptWithState(args.torchscript_module, model->tensors, args.out);
  }
  std::map<std::string, std::string> metadata;
  for (const std::string& pair : args.meta) {
    const size_t equals = pair.find('=');
    metadata[pair.substr(0, equals)] =
        equals == std::string::npos ? "" : pair.substr(equals + 1);
  }
  return WriteSafetensors(model->tensors, metadata, args.out);
}

}  // namespace

int ExportMain(int argc, char** argv) {
  ExportArgs args;
  CLI::App app{"writes a checkpoint's model as safetensors, or into the "
               "job's TorchScript module; run by `trainctl export`"};
  app.add_option("--checkpoint", args.checkpoint, "the checkpoint file")->required();
  app.add_option("--out", args.out, "the file to write")->required();
  app.add_option("--format", args.format, "safetensors | torchscript")
      ->required()
      ->check(CLI::IsMember({"safetensors", "torchscript"}));
  app.add_option("--torchscript-module", args.torchscript_module,
                 "torchscript: the job's model.path");
  app.add_option("--meta", args.meta, "safetensors: KEY=VALUE metadata");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (args.format == "torchscript" && args.torchscript_module.empty()) {
    std::cerr << "export: --format torchscript needs --torchscript-module\n";
    return 2;
  }
  const absl::Status exported = Export(args);
  if (!exported.ok()) {
    std::cerr << exported.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace trainctl::train
