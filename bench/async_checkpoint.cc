// What a checkpoint of a large model costs the training loop: the
// synchronous write against checkpoint.async, through the Checkpointer a
// rank uses, on the built-in gpt at about 100 M parameters with AdamW's
// state. Also one training step's time alone and while an async write
// runs (the writer takes a core the loop might have used).
//
// Prints one JSON object: the median of each figure over --runs, and the
// shapes of the state, which bench/async_checkpoint.py hands to the peer
// (bench/async_checkpoint_peer.py) to build the same tensors in PyTorch.
//
//   bench_async_checkpoint --dir /tmp/ckpt [--runs 5] [--layers 14]

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/spec.h"
#include "worker/train/checkpointer.h"
#include "worker/train/models/model.h"
#include "worker/train/optim/optimizers.h"

namespace {

using namespace trainctl::train;
using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Figures {
  std::vector<double> sync_blocked, sync_write, async_blocked, async_write;
  std::vector<double> step_alone, step_during_write;
  int64_t bytes = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int runs = 5;
  int layers = 14;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--dir") == 0) dir = argv[i + 1];
    if (strcmp(argv[i], "--runs") == 0) runs = atoi(argv[i + 1]);
    if (strcmp(argv[i], "--layers") == 0) layers = atoi(argv[i + 1]);
  }
  if (dir.empty() || dir.front() != '/' || runs < 1) {
    fprintf(stderr, "usage: %s --dir ABSOLUTE_DIR [--runs N] [--layers L]\n", argv[0]);
    return 2;
  }
  at::set_num_threads(1);
  const std::string yaml =
      "model: {type: gpt, d_model: 768, n_layers: " + std::to_string(layers) +
      ", n_heads: 12, max_seq_len: 128}\n"
      "data: {format: text, train_path: /unused, seq_len: 128}\n"
      "optimizer: {type: adamw, lr: 0.0001}\n"
      "checkpoint: {dir: " + dir + "}\n";
  absl::StatusOr<trainctl::v1::JobSpec> spec = trainctl::ParseJobSpec(yaml);
  if (!spec.ok()) {
    fprintf(stderr, "%s\n", std::string(spec.status().message()).c_str());
    return 1;
  }
  DataInfo text;
  text.input_shape = {128};
  text.integer_inputs = true;
  text.vocab_size = 256;
  absl::StatusOr<std::unique_ptr<Model>> model = BuildModel(*spec, text);
  if (!model.ok()) return 1;
  std::vector<torch::Tensor> params = (*model)->Parameters();
  std::unique_ptr<torch::optim::Optimizer> optimizer =
      BuildOptimizer(spec->optimizer(), params);
  const torch::Tensor x = torch::randint(256, {2, 128});
  auto train_step = [&] {
    const auto start = Clock::now();
    optimizer->zero_grad();
    (*model)->Forward(x).to(torch::kFloat32).pow(2).mean().backward();
    optimizer->step();
    return Ms(start);
  };
  train_step();  // AdamW has its state now
  int64_t numel = 0;
  for (const auto& p : params) numel += p.numel();

  Figures f;
  std::vector<trainctl::v1::Checkpoint> written;
  RankContext ctx;
  ctx.job_id = "bench";
  ctx.on_checkpoint = [&](const trainctl::v1::Checkpoint& c) { written.push_back(c); };
  TrainingStateRefs refs{model->get(), optimizer.get(), params, nullptr};
  auto take = [&](std::vector<double>* blocked, std::vector<double>* write) {
    if (written.empty()) return false;
    blocked->push_back(written.back().blocked_ms());
    write->push_back(written.back().write_ms());
    f.bytes = written.back().bytes();
    ::unlink(written.back().path().c_str());
    written.clear();
    return true;
  };
  for (int run = 0; run < runs; ++run) {
    TrainingCursor cursor;
    cursor.step = run + 1;
    trainctl::v1::JobSpec sync_spec = *spec;
    Checkpointer sync(sync_spec, ctx, refs);
    if (!sync.Save(cursor, {}).ok() || !take(&f.sync_blocked, &f.sync_write)) return 1;

    f.step_alone.push_back(train_step());
    trainctl::v1::JobSpec async_spec = *spec;
    async_spec.mutable_checkpoint()->set_async(true);
    Checkpointer async(async_spec, ctx, refs);
    if (!async.Save(cursor, {}).ok()) return 1;
    f.step_during_write.push_back(train_step());
    if (!async.Finish().ok() || !take(&f.async_blocked, &f.async_write)) return 1;
  }
  std::string shapes;
  for (const auto& [name, tensor] : (*model)->NamedState()) {
    if (!shapes.empty()) shapes += ",";
    shapes += "[\"" + name + "\",[";
    for (size_t d = 0; d < tensor.sizes().size(); ++d) {
      shapes += (d ? "," : "") + std::to_string(tensor.size(d));
    }
    shapes += std::string("],") + (tensor.requires_grad() ? "true" : "false") + "]";
  }
  printf("{\"parameters\": %lld, \"bytes\": %lld, \"runs\": %d,\n"
         " \"sync_blocked_ms\": %.1f, \"sync_write_ms\": %.1f,\n"
         " \"async_blocked_ms\": %.1f, \"async_write_ms\": %.1f,\n"
         " \"step_ms\": %.1f, \"step_during_write_ms\": %.1f,\n"
         " \"shapes\": [%s]}\n",
         static_cast<long long>(numel), static_cast<long long>(f.bytes), runs,
         Median(f.sync_blocked), Median(f.sync_write), Median(f.async_blocked),
         Median(f.async_write), Median(f.step_alone), Median(f.step_during_write),
         shapes.c_str());
  return 0;
}
