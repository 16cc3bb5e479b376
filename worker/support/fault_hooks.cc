#include "worker/support/fault_hooks.h"

#include <cstdlib>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace trainctl::train {

absl::StatusOr<FaultHooks> FaultHooks::Parse(absl::string_view text) {
  FaultHooks hooks;
  for (absl::string_view entry : absl::StrSplit(text, ';', absl::SkipEmpty())) {
    const std::vector<absl::string_view> kind_args =
        absl::StrSplit(entry, absl::MaxSplits(':', 1));
    Fault fault;
    fault.kind = std::string(kind_args[0]);
    if (fault.kind != "hang" && fault.kind != "exit" && fault.kind != "exit_after_update" &&
        fault.kind != "crash_in_checkpoint" && fault.kind != "inf_gradient" &&
        fault.kind != "slow_join" && fault.kind != "wait_for_stop" &&
        fault.kind != "slow_compute" && fault.kind != "exit_in_regroup" &&
        fault.kind != "freeze_before_state") {
      return absl::InvalidArgumentError(
          absl::StrCat("TRAINCTL_FAULT: unknown kind '", fault.kind, "'"));
    }
    bool has_step = false;
    if (kind_args.size() == 2) {
      for (absl::string_view kv : absl::StrSplit(kind_args[1], ',')) {
        const std::vector<absl::string_view> parts = absl::StrSplit(kv, '=');
        int64_t value = 0;
        if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &value)) {
          return absl::InvalidArgumentError(
              absl::StrCat("TRAINCTL_FAULT: '", kv, "' is not key=number"));
        }
        if (parts[0] == "rank") {
          fault.rank = static_cast<int>(value);
        } else if (parts[0] == "step") {
          fault.step = value;
          has_step = true;
        } else if (parts[0] == "generation") {
          fault.generation = static_cast<int>(value);
        } else if (parts[0] == "job") {
          fault.job = value;
        } else if (parts[0] == "ms") {
          fault.ms = value;
        } else {
          return absl::InvalidArgumentError(
              absl::StrCat("TRAINCTL_FAULT: unknown key '", parts[0], "'"));
        }
      }
    }
    if (!has_step) {
      return absl::InvalidArgumentError(
          absl::StrCat("TRAINCTL_FAULT: '", entry, "' needs step=N"));
    }
    hooks.faults_.push_back(fault);
  }
  return hooks;
}

FaultHooks FaultHooks::FromEnvironment() {
  FaultHooks hooks;
  if (const char* faults = std::getenv("TRAINCTL_FAULT")) {
    absl::StatusOr<FaultHooks> parsed = Parse(faults);
    if (parsed.ok()) {
      hooks = *std::move(parsed);
    } else {
      std::cerr << parsed.status().message() << " (ignored)" << std::endl;
    }
  }
  if (const char* dir = std::getenv("TRAINCTL_SAMPLE_LOG")) {
    hooks.sample_log_dir = dir;
  }
  return hooks;
}

FaultHooks FaultHooks::ForJob(const std::string& job_id) const {
  FaultHooks hooks = *this;
  hooks.faults_.clear();
  for (const Fault& f : faults_) {
    if (f.job == 0 || absl::StrCat("job-", f.job) == job_id) {
      hooks.faults_.push_back(f);
    }
  }
  return hooks;
}

int64_t FaultHooks::DelayMs(absl::string_view kind, int rank, int generation,
                            int64_t step) const {
  for (const Fault& f : faults_) {
    if (f.kind == kind && f.rank == rank && f.generation == generation &&
        step >= f.step) {
      return f.ms;
    }
  }
  return 0;
}

bool FaultHooks::Fires(absl::string_view kind, int rank, int generation,
                       int64_t step) const {
  for (const Fault& f : faults_) {
    if (f.kind == kind && f.rank == rank && f.generation == generation &&
        f.step == step) {
      return true;
    }
  }
  return false;
}

}  // namespace trainctl::train
