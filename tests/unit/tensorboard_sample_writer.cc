// Writes a known run of TensorBoard scalars into the directory given:
// two event files, as rank 0 writes them across a restart. The
// tensorboard_readback test reads them back with the real `tensorboard`
// package and compares every tag, step, value and wall time.

#include <cstdio>
#include <memory>

#include "worker/support/tensorboard_writer.h"

namespace {

constexpr int64_t kStart = 1'700'000'000;  // both generations in one second

bool Write(const std::string& dir, int64_t step, double wall,
           const std::map<std::string, double>& values,
           trainctl::train::TensorBoardWriter& writer) {
  absl::Status written = writer.WriteScalars(step, wall, values);
  if (!written.ok()) std::fprintf(stderr, "%s: %s\n", dir.c_str(), written.ToString().c_str());
  return written.ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  using trainctl::train::TensorBoardWriter;
  // Generation 1, then generation 2 resumed from a checkpoint at step 20
  // (a second file in the same directory, in the same second).
  auto first = TensorBoardWriter::Create(dir, kStart, "node-a");
  if (!first.ok()) return std::fprintf(stderr, "%s\n", first.status().ToString().c_str()), 1;
  bool ok = Write(dir, 10, kStart + 1.5, {{"loss", 0.75}, {"lr", 0.001}}, **first) &&
            Write(dir, 20, kStart + 2.5, {{"loss", 0.5}, {"eval_accuracy", 0.8125}}, **first);
  first->reset();
  auto second = TensorBoardWriter::Create(dir, kStart, "node-a");
  if (!second.ok()) return std::fprintf(stderr, "%s\n", second.status().ToString().c_str()), 1;
  ok = ok && Write(dir, 30, kStart + 4.25, {{"loss", 0.25}, {"lr", 0.0005}}, **second) &&
       Write(dir, 40, kStart + 5.0, {{"loss", 0.125}, {"eval_accuracy", 0.875}}, **second);
  return ok ? 0 : 1;
}
