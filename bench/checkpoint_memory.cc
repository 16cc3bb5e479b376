// Peak memory of a training step with and without gradient checkpointing.
//
// Each configuration runs in its own child process (this binary re-executed
// with --child), so the peak resident set size the kernel reports for that
// child (wait4's ru_maxrss) is the step's peak and nothing else's. Prints a
// table and the ratio checkpointed / plain per model.
//
//   bench_checkpoint_memory [--steps 3]

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/spec.h"
#include "worker/train/models/model.h"

extern char** environ;

namespace {

using trainctl::train::DataInfo;

struct Config {
  const char* name;
  const char* spec;
  DataInfo info;
  int batch;  // large enough that activations, not weights, dominate
};

std::vector<Config> Configs() {
  DataInfo images;
  images.input_shape = {1, 28, 28};
  images.num_classes = 10;
  DataInfo text;
  text.input_shape = {256};
  text.integer_inputs = true;
  text.vocab_size = 256;
  return {
      {"mlp 8x2048", "model: {type: mlp, hidden: [2048,2048,2048,2048,2048,2048,2048,2048]}\n"
                     "data: {train_images: a, train_labels: b}\n", images, 4096},
      {"gpt 6x256 seq256", "model: {type: gpt, d_model: 256, n_layers: 6, n_heads: 8,"
                           " max_seq_len: 256}\n"
                           "data: {format: text, train_path: a, seq_len: 256}\n", text, 64},
  };
}

// One child: builds the model and runs `steps` forward/backward passes.
int RunChild(int index, bool checkpointing, int steps) {
  at::set_num_threads(1);
  const Config config = Configs()[index];
  const int batch = config.batch;
  std::string yaml = config.spec;
  if (checkpointing) yaml += "training: {gradient_checkpointing: true}\n";
  auto spec = trainctl::ParseJobSpec(yaml);
  if (!spec.ok()) {
    fprintf(stderr, "%s\n", std::string(spec.status().message()).c_str());
    return 1;
  }
  auto model = trainctl::train::BuildModel(*spec, config.info);
  if (!model.ok()) return 1;
  (*model)->SetTraining(true);
  torch::Tensor x = config.info.integer_inputs
                        ? torch::randint(256, {batch, 256})
                        : torch::rand({batch, 1, 28, 28});
  for (int i = 0; i < steps; ++i) {
    torch::Tensor out = (*model)->Forward(x);
    out.to(torch::kFloat32).pow(2).mean().backward();
  }
  return 0;
}

// Peak RSS in MiB of one child run, or -1 on failure.
double MeasureMiB(const char* self, int index, bool checkpointing, int steps) {
  std::vector<std::string> args = {self, "--child", std::to_string(index),
                                   checkpointing ? "1" : "0",
                                   std::to_string(steps)};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawn(&pid, self, nullptr, nullptr, argv.data(), environ) != 0) {
    return -1;
  }
  int status = 0;
  rusage usage{};
  if (wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    return -1;
  }
  return usage.ru_maxrss / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && strcmp(argv[1], "--child") == 0) {
    return RunChild(atoi(argv[2]), atoi(argv[3]) != 0, atoi(argv[4]));
  }
  int steps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--steps") == 0) steps = atoi(argv[i + 1]);
  }
  printf("gradient checkpointing: peak RSS of %d training steps\n", steps);
  printf("%-20s %6s %12s %16s %8s\n", "model", "batch", "plain MiB",
         "checkpointed MiB", "ratio");
  const auto configs = Configs();
  for (size_t i = 0; i < configs.size(); ++i) {
    const double plain = MeasureMiB(argv[0], i, false, steps);
    const double ckpt = MeasureMiB(argv[0], i, true, steps);
    if (plain < 0 || ckpt < 0) {
      printf("%-20s failed\n", configs[i].name);
      return 1;
    }
    printf("%-20s %6d %12.1f %16.1f %8.3f\n", configs[i].name, configs[i].batch,
           plain, ckpt, ckpt / plain);
  }
  return 0;
}
