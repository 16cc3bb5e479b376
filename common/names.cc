#include "common/names.h"

namespace trainctl {
namespace {

std::string Strip(const std::string& full, const std::string& prefix) {
  if (full.empty() || full == prefix + "UNSPECIFIED") return "UNKNOWN";
  return full.substr(prefix.size());
}

}  // namespace

std::string JobStateName(v1::JobState state) {
  return Strip(v1::JobState_Name(state), "JOB_STATE_");
}

std::string RankStateName(v1::RankState state) {
  return Strip(v1::RankState_Name(state), "RANK_STATE_");
}

}  // namespace trainctl
