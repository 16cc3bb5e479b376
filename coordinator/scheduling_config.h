#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/scheduler.h"

namespace trainctl::coordinator {

// A named priority: jobs of a higher value are considered first. A running
// job of the class, when preempted, has grace_ms to checkpoint and stop
// before its ranks are terminated.
struct PriorityClass {
  std::string name;
  int value = 0;
  int64_t grace_ms = 120'000;
};

// What the operator decides about sharing the cluster (--scheduling FILE,
// docs/scheduling.md): the priority classes, the default one and the
// highest each user may ask for, quotas per user and per group, the
// fair-share half-life and whether backfill is on. Reloaded on SIGHUP; a
// copy is immutable once loaded, so the JobManager swaps it whole.
struct SchedulingConfig {
  std::vector<PriorityClass> classes;  // highest value first
  std::string default_class;
  // By user name; "*" for every user not named.
  std::map<std::string, Quota> user_quotas;
  std::map<std::string, std::string> max_class_of_user;
  std::map<std::string, std::string> group_of_user;
  std::map<std::string, Quota> group_quotas;
  double half_life_hours = 24;
  bool backfill = true;
  // Whether waiting jobs may stop running ones (a higher class, or a job
  // within its quota taking back borrowed slots).
  bool preemption = true;
  // Where it came from, for messages: the file, or "the built-in default".
  std::string origin;

  // nullptr when no class has that name.
  const PriorityClass* FindClass(const std::string& name) const;
  // The value of a job's class now; a class removed by a reload counts as
  // the default class.
  int ValueOf(const std::string& name) const;
  // The grace period of a job's class now (the default class's when gone).
  int64_t GraceOf(const std::string& name) const;
  // The class a job of `user` asking for `requested` ("" = the default)
  // gets. INVALID_ARGUMENT naming field `priority` for an unknown class or
  // one above the user's maximum.
  absl::StatusOr<PriorityClass> Resolve(const std::string& requested,
                                        const std::string& user) const;
};

// One class "normal" (0) for everyone, no quotas, a 24-hour half-life,
// backfill on: what a coordinator without --scheduling does.
SchedulingConfig DefaultSchedulingConfig();

// Parses the YAML of a scheduling file. INVALID_ARGUMENT listing every
// problem, each "ORIGIN: FIELD: what" (unknown keys too). Pure.
absl::StatusOr<SchedulingConfig> ParseSchedulingConfig(const std::string& text,
                                                       const std::string& origin);
// Reads and parses `path`: NOT_FOUND / PERMISSION_DENIED naming the file
// when it cannot be read.
absl::StatusOr<SchedulingConfig> LoadSchedulingConfig(const std::string& path);

}  // namespace trainctl::coordinator
