#pragma once

// How much memory this node offers its ranks, registered with the
// coordinator for the dry run's memory plan: the system's memory (or the
// cgroup's limit, in a container) and the smallest of its GPUs'.

#include <cstdint>
#include <string>
#include <vector>

namespace trainctl::agent {

// Bytes from /proc/meminfo's MemTotal line and a cgroup v2 memory.max
// ("max" or a number): the lower of the two; 0 when neither says.
int64_t MemoryBytesFrom(const std::string& meminfo, const std::string& cgroup_max);

// The smallest memory.total of `gpus` (indices or UUIDs as --gpus lists
// them) in nvidia-smi's "index, uuid, memory.total [MiB]" CSV lines
// (noheader, nounits); 0 when none of them is listed.
int64_t GpuMemoryBytesFrom(const std::string& nvidia_smi_csv,
                           const std::vector<std::string>& gpus);

// The two above for this node: /proc/meminfo, /sys/fs/cgroup/memory.max,
// and nvidia-smi when there are GPUs (0 when it is missing or fails).
int64_t NodeMemoryBytes();
int64_t NodeGpuMemoryBytes(const std::vector<std::string>& gpus);

}  // namespace trainctl::agent
