#pragma once

#include <cstdint>
#include <string>

namespace trainctl::bench {

// How busy the whole machine is (all processes, from /proc/stat), slice by
// slice: the benchmark's load arrives in bursts or evenly, and a latency
// tail inside a burst where every core is busy is the machine's, not a
// queue's. Blocks for `slices` x `slice_ms`; returns one digit per slice,
// 0 (idle) to 9 (every core busy), lines of one second each. The kernel
// counts in ticks of 10 ms per core, so a slice of 20 ms on 2 cores has 4:
// read the digits as coarse.
std::string TraceMachineBusy(int slice_ms, int slices);

}  // namespace trainctl::bench
