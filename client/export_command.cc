#include "client/export_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/json_text.h"
#include "common/file_digest.h"
#include "common/helper_process.h"
#include "common/shipped_files.h"
#include "common/checkpoint_name.h"
#include "common/model_metadata.h"
#include "common/vocabulary.h"

namespace trainctl::client {
namespace {

constexpr char kWorkerBinary[] = "trainctl-worker";

// The format `out`'s name asks for; empty when it says nothing.
std::string FormatFromName(const std::string& out) {
  if (absl::EndsWith(out, ".safetensors")) return "safetensors";
  for (const char* ext : {".pt", ".pth", ".ts", ".torchscript"}) {
    if (absl::EndsWith(out, ext)) return "torchscript";
  }
  return "";
}

// data.transforms as the job applied them: normalize.from_data's
// statistics are computed by the ranks, which report them in the plan
// metric (normalize_mean_C, normalize_std_C); the newest plan wins.
absl::StatusOr<v1::ImageTransformsSpec> AppliedTransforms(Env& env, const v1::Job& job) {
  v1::ImageTransformsSpec transforms = job.spec().data().transforms();
  if (!transforms.normalize().from_data()) return transforms;
  std::map<std::string, double> plan;
  absl::Status read = env.client->WatchJobSnapshot(job.id(), 1, [&](const v1::JobEvent& e) {
    if (e.has_metric() && ParseMetricKind(e.metric().kind()) == MetricKind::kPlan &&
        e.metric().values().count("normalize_mean_0")) {
      plan.clear();
      plan.insert(e.metric().values().begin(), e.metric().values().end());
    }
  });
  if (!read.ok()) return read;
  if (plan.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "job ", job.id(), " normalised its inputs by statistics computed from "
        "the data (data.transforms.normalize.from_data), but its events hold "
        "no plan metric with them (normalize_mean_0)"));
  }
  v1::NormalizeSpec* normalize = transforms.mutable_normalize();
  for (int c = 0; plan.count(absl::StrCat("normalize_mean_", c)); ++c) {
    normalize->add_mean(plan[absl::StrCat("normalize_mean_", c)]);
    normalize->add_std(plan[absl::StrCat("normalize_std_", c)]);
  }
  return transforms;
}

// trainctl-worker export's --meta flags: the file's metadata
// (common/model_metadata.h).
std::vector<std::string> MetadataFlags(const v1::Job& job, const v1::Checkpoint& c,
                                       const v1::ImageTransformsSpec& transforms) {
  const std::map<std::string, double> eval(c.metrics().begin(), c.metrics().end());
  std::vector<std::string> flags;
  for (const auto& [key, value] :
       ModelFileMetadata(job.spec(), job.id(), c.step(), c.epoch(), eval, transforms)) {
    flags.push_back("--meta");
    flags.push_back(absl::StrCat(key, "=", value));
  }
  return flags;
}

int Usage(const Env& env, const std::string& message) {
  env.err << "trainctl: export: " << message << "\n";
  return kExitUsage;
}

int Failed(const Env& env, const std::string& message) {
  env.err << "trainctl: export: " << message << "\n";
  return kExitFailed;
}

}  // namespace

CLI::App* AddExportCommand(CLI::App& app, ExportArgs* args) {
  CLI::App* command = app.add_subcommand(
      "export", "Write a checkpoint's model in a format Python loads: "
                "safetensors, or a TorchScript job's module with its trained "
                "weights");
  command->add_option("JOB", args->ref, "JOB (its newest checkpoint) or JOB:STEP")
      ->required();
  command->add_option("-o,--file", args->out,
                      "The file to write (.safetensors, or .pt for a TorchScript job)")
      ->required();
  command->add_option("--format", args->format,
                      "safetensors | torchscript (default: from the file's name)")
      ->check(CLI::IsMember({"safetensors", "torchscript"}));
  command->footer(
      "\nThe checkpoint file must be readable here (checkpoint.dir on a shared "
      "filesystem, or the node that wrote it), and trainctl-worker installed: "
      "it does the conversion with LibTorch. Built-in models load in Python "
      "with examples/trainctl_models.py.\n\nExamples:\n"
      "  trainctl export job-3 -o model.safetensors\n"
      "  trainctl export job-3:400 -o tuned.pt\n"
      "  trainctl export job-3 -o model.safetensors --output json");
  return command;
}

int CmdExport(Env& env, const ExportArgs& args) {
  absl::StatusOr<CheckpointRef> ref = ParseCheckpointRef(args.ref, "JOB");
  if (!ref.ok()) return Usage(env, std::string(ref.status().message()));
  const std::string format = args.format.empty() ? FormatFromName(args.out) : args.format;
  if (format.empty()) {
    return Usage(env, absl::StrCat(
        "-o ", args.out, ": name it .safetensors or .pt, or give --format "
        "safetensors|torchscript"));
  }
  absl::StatusOr<v1::Job> job = env.client->GetJob(ref->job_id);
  if (!job.ok()) return Fail(env, job.status());
  absl::StatusOr<v1::ListCheckpointsResponse> listed =
      env.client->ListCheckpoints(ref->job_id);
  if (!listed.ok()) return Fail(env, listed.status());
  if (listed->checkpoints().empty()) {
    env.err << "trainctl: export: job " << ref->job_id << " has no checkpoints"
            << (job->spec().checkpoint().dir().empty()
                    ? " (its spec sets no checkpoint.dir)" : "") << "\n";
    return kExitNotFound;
  }
  const v1::Checkpoint* chosen = nullptr;
  std::vector<std::string> steps;
  for (const v1::Checkpoint& c : listed->checkpoints()) {
    steps.push_back(absl::StrCat(c.step()));
    if (!ref->step ? chosen == nullptr || c.step() > chosen->step() : c.step() == *ref->step) {
      chosen = &c;
    }
  }
  if (chosen == nullptr) {
    env.err << "trainctl: export: job " << ref->job_id << " has no checkpoint at step "
            << *ref->step << " (it has steps " << absl::StrJoin(steps, ", ") << ")\n";
    return kExitNotFound;
  }
  const v1::ModelSpec& model = job->spec().model();
  if (format == "torchscript" && ModelTypeOf(model) != ModelType::kTorchScript) {
    return Usage(env, absl::StrCat(
        "job ", job->id(), "'s model is the built-in ", model.type(),
        ", not a TorchScript module: export it as .safetensors and load it "
        "with examples/trainctl_models.py"));
  }
  if (::access(chosen->path().c_str(), R_OK) != 0) {
    return Failed(env, absl::StrCat(
        "checkpoint ", job->id(), ":", chosen->step(), " is ", chosen->path(),
        ", which is not readable here (", strerror(errno), "); run trainctl "
        "export where checkpoint.dir is visible: a shared filesystem, or the "
        "node that wrote it"));
  }
  const std::string worker = FindSiblingProgram(kWorkerBinary);
  if (worker.empty()) {
    return Failed(env, absl::StrCat(
        "needs ", kWorkerBinary, " (it converts with LibTorch) beside trainctl "
        "or on PATH; install the worker package, or run it on a worker node"));
  }
  std::vector<std::string> argv = {worker, "export", "--checkpoint", chosen->path(),
                                   "--out", args.out, "--format", format};
  if (format == "torchscript") {
    // A module shipped from the submitter's machine is read here, where
    // its relative path must name the same content.
    if (IsSubmitterPath(model.path())) {
      std::string uploaded;
      for (const v1::ShippedFile& f : job->spec().shipped_files()) {
        if (f.field() == "model.path") uploaded = f.sha256();
      }
      absl::StatusOr<std::string> here = Sha256OfFile(model.path());
      if (!here.ok() || *here != uploaded) {
        return Failed(env, absl::StrCat(
            "job ", job->id(), "'s model.path ", model.path(),
            " was uploaded from the submitter's machine (sha256 ", uploaded.substr(0, 12),
            "); run trainctl export in the directory that has that file (",
            here.ok() ? "the one here differs" : "it is not here", ")"));
      }
    }
    argv.insert(argv.end(), {"--torchscript-module", model.path()});
  } else {
    absl::StatusOr<v1::ImageTransformsSpec> transforms = AppliedTransforms(env, *job);
    if (absl::IsNotFound(transforms.status())) {
      return Failed(env, std::string(transforms.status().message()));
    }
    if (!transforms.ok()) return Fail(env, transforms.status());
    for (std::string& flag : MetadataFlags(*job, *chosen, *transforms)) {
      argv.push_back(std::move(flag));
    }
  }
  absl::StatusOr<ChildResult> ran = RunChild(argv);
  if (!ran.ok()) return Failed(env, std::string(ran.status().message()));
  if (ran->exit_code != 0) {
    const std::string why(absl::StripTrailingAsciiWhitespace(ran->output));
    return Failed(env, why.empty() ? absl::StrCat(worker, " exited with ", ran->exit_code)
                                   : why);
  }
  struct stat written;
  const int64_t bytes = ::stat(args.out.c_str(), &written) == 0 ? written.st_size : 0;
  if (env.json) {
    env.out << "{\"path\":" << JsonString(args.out) << ",\"format\":\"" << format
            << "\",\"job_id\":" << JsonString(job->id()) << ",\"step\":" << chosen->step()
            << ",\"bytes\":" << bytes << "}\n";
    return kExitOk;
  }
  env.out << "Wrote " << args.out << " (" << format << ", "
          << absl::StrFormat("%.1f MB", bytes / 1e6) << ") from checkpoint "
          << job->id() << ":" << chosen->step() << ", epoch "
          << chosen->epoch() + 1;
  if (auto acc = chosen->metrics().find("eval_accuracy"); acc != chosen->metrics().end()) {
    env.out << absl::StrFormat(", eval_accuracy %.4f", acc->second);
  } else if (auto loss = chosen->metrics().find("eval_loss");
             loss != chosen->metrics().end()) {
    env.out << absl::StrFormat(", eval_loss %.4f", loss->second);
  }
  env.out << "\n";
  if (format == "safetensors") {
    env.out << "Load it in Python: trainctl_models.load(\"" << args.out
            << "\") (examples/trainctl_models.py)\n";
  } else {
    env.out << "Load it in Python: torch.jit.load(\"" << args.out << "\")\n";
  }
  return kExitOk;
}

}  // namespace trainctl::client
