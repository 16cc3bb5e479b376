#include "worker/train/step_profiler.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"
#include "worker/train/torch_compat.h"

namespace trainctl::train {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

std::set<ActivityType> Activities() {
  std::set<ActivityType> activities{ActivityType::CPU};
  if (torch::cuda::is_available()) activities.insert(ActivityType::CUDA);
  return activities;
}

std::string JsonText(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// The Chrome trace of the operators the profiler recorded, for a LibTorch
// built without Kineto (Debian's 1.13), whose own writer refuses: host
// operators only, as complete ("X") events on their threads.
void WriteOperatorTrace(const profiler::ProfilerResult& result, int rank,
                        const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  out << "{\"traceEvents\": [";
  const char* separator = "\n";
  for (const auto& event : result.events()) {
    out << separator << "{\"name\": " << JsonText(event.name())
        << ", \"ph\": \"X\", \"cat\": \"cpu_op\", \"pid\": " << rank
        << ", \"tid\": " << event.startThreadId()
        << absl::StrFormat(", \"ts\": %.3f, \"dur\": %.3f}",
                           ProfilerEventStartUs(event), ProfilerEventDurationUs(event));
    separator = ",\n";
  }
  out << "\n], \"displayTimeUnit\": \"ms\"}\n";
  out.close();
  if (!out) throw std::runtime_error("the file could not be written");
}

}  // namespace

StepProfiler::StepProfiler(const v1::ProfileSpec& spec, std::string job_id,
                           int rank, std::ostream& say)
    : spec_(spec), job_id_(std::move(job_id)), rank_(rank), say_(say) {}

StepProfiler::~StepProfiler() {
  if (tracing_) Say(StopAndWrite());
}

void StepProfiler::Say(const absl::StatusOr<std::string>& written) {
  if (!written.ok()) {
    say_ << written.status().message() << std::endl;
  } else if (!written->empty()) {
    say_ << "profile: wrote " << *written << std::endl;
  }
}

void StepProfiler::BeforeStep(int64_t step) {
  if (spec_.dir().empty() || step < spec_.start_step() ||
      step >= spec_.start_step() + spec_.steps()) {
    return;
  }
  if (absl::Status started = Start(step); !started.ok()) Say(started);
}

absl::Status StepProfiler::Start(int64_t step) {
  try {
    if (!tracing_) {
      const ProfilerConfig config(ProfilerState::KINETO);
      profiler::prepareProfiler(config, Activities());
      profiler::enableProfiler(config, Activities());
      tracing_ = true;
      first_traced_ = step;
    }
    step_range_ = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
    step_range_->before(absl::StrCat("trainctl step ", step));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(
        "profile: torch's profiler did not start (", e.what(), "); no trace"));
  }
  return absl::OkStatus();
}

void StepProfiler::AfterStep(int64_t step) {
  if (!tracing_) return;
  step_range_.reset();
  last_traced_ = step;
  if (step + 1 < spec_.start_step() + spec_.steps()) return;
  Say(StopAndWrite());
}

void StepProfiler::Finish() {
  if (!tracing_) return;
  step_range_.reset();
  Say(StopAndWrite());
}

absl::StatusOr<std::string> StepProfiler::StopAndWrite() {
  tracing_ = false;
  std::unique_ptr<profiler::ProfilerResult> result;
  try {
    result = profiler::disableProfiler();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("profile: stopping torch's profiler: ", e.what()));
  }
  const std::string folder = absl::StrCat(spec_.dir(), "/", job_id_);
  const std::string path =
      absl::StrCat(folder, "/rank-", rank_, "-steps-", first_traced_, "-",
                   last_traced_ < first_traced_ ? first_traced_ : last_traced_, ".json");
  // POSIX calls, not std::filesystem, in a program that links torch
  // (common/atomic_file.h says why).
  if (absl::Status made = MakeDirs(folder); !made.ok()) {
    return absl::InternalError(absl::StrCat("profile.dir: ", made.message()));
  }
  // Written aside, then renamed: a reader never sees half a trace.
  const std::string partial = path + ".partial";
  try {
    if (result == nullptr) throw std::runtime_error("the profiler returned no result");
    try {
      result->save(partial);  // Kineto's writer: kernels and streams too
    } catch (const c10::Error&) {
      WriteOperatorTrace(*result, rank_, partial);  // a LibTorch without Kineto
    }
    if (::access(partial.c_str(), F_OK) != 0) throw std::runtime_error("no file was written");
  } catch (const std::exception& e) {
    std::remove(partial.c_str());
    return absl::InternalError(absl::StrCat("profile: writing ", path, ": ", e.what()));
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(partial.c_str());
    return absl::InternalError(absl::StrCat("profile.dir: cannot write ", path, ": ", reason));
  }
  return path;
}

}  // namespace trainctl::train
