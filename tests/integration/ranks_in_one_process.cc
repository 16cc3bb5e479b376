// Linked into every test binary that runs several ranks of a job as
// threads of one process (each with its own collective group).
//
// PyTorch 2.x's flight recorder, on by default, adds each new group to a
// std::map outside its lock (c10d::FlightRecorder::recordWithResetEnabled,
// all_pg_status_): two groups issuing their first collective at the same
// time corrupt the map, and the process crashes. A rank process holds one
// group, so only such tests can meet it; they turn the recorder off before
// any group exists (it reads these variables once, at first use). LibTorch
// 1.13 has no flight recorder and ignores them.

#include <cstdlib>

namespace {

[[maybe_unused]] const bool kFlightRecorderOff = [] {
  setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/1);
  setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "0", /*overwrite=*/1);
  return true;
}();

}  // namespace
