// trainctl-worker: the node agent, (as `trainctl-worker rank ...`) the
// rank process it spawns for each assigned slot, and (as `trainctl-worker
// export ...`) the torch side of `trainctl export`.

#include <string.h>

#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "worker/train/export_main.h"
#include "worker/train/rank_main.h"
#include "worker/worker_node.h"

// Set by CMake (cmake/trainctl_build_info.cmake); a build without them says
// so instead of guessing. An empty CUDA version means a CPU-only LibTorch.
#ifndef TRAINCTL_GRPC_VERSION
#define TRAINCTL_GRPC_VERSION "unknown"
#endif
#ifndef TRAINCTL_PROTOBUF_VERSION
#define TRAINCTL_PROTOBUF_VERSION "unknown"
#endif
#ifndef TRAINCTL_TORCH_VERSION
#define TRAINCTL_TORCH_VERSION "unknown"
#endif
#ifndef TRAINCTL_CUDA_VERSION
#define TRAINCTL_CUDA_VERSION ""
#endif
#ifndef TRAINCTL_NCCL_VERSION
#define TRAINCTL_NCCL_VERSION ""
#endif

namespace {

// What --version prints: this build and the libraries it was compiled with.
std::string VersionText() {
  const std::string cuda = TRAINCTL_CUDA_VERSION;
  const std::string accelerator =
      cuda.empty() ? "CPU only (LibTorch without CUDA; collectives use Gloo)"
                   : "CUDA " + cuda + ", NCCL " + TRAINCTL_NCCL_VERSION;
  return std::string("trainctl-worker ") + TRAINCTL_VERSION +
         "\n"
         "  LibTorch " TRAINCTL_TORCH_VERSION
         "\n"
         "  gRPC " TRAINCTL_GRPC_VERSION
         "\n"
         "  Protobuf " TRAINCTL_PROTOBUF_VERSION "\n  " +
         accelerator;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "rank") == 0) {
    return trainctl::train::RankMain(argc - 1, argv + 1);
  }
  if (argc > 1 && strcmp(argv[1], "export") == 0) {
    return trainctl::train::ExportMain(argc - 1, argv + 1);
  }
  trainctl::worker::WorkerFlags flags;
  CLI::App app{"trainctl-worker: the node agent. Registers this node's slots "
               "with the coordinator and runs one rank process per assigned "
               "slot.\n\nExample:\n  trainctl-worker --coordinator "
               "head:7070 --slots 2 --name node-a"};
  app.set_version_flag("--version", VersionText());
  app.footer(
      "\nThe worker serves no port: it is alive while this process runs, "
      "and `trainctl workers` shows whether the coordinator hears it.");
  trainctl::worker::AddWorkerFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  return trainctl::worker::RunWorker(std::move(flags));
}
