#include "worker/train/collective_wait.h"

#include <chrono>
#include <utility>
#include <vector>

namespace trainctl::train {
namespace {

// How often a long wait asks the check: a recovery starts at most this
// late. Work::wait returns as soon as the work is done, so a slice costs a
// collective nothing.
constexpr std::chrono::milliseconds kSlice{100};

std::function<std::string()>& AbandonCheck() {
  static auto* check = new std::function<std::string()>();
  return *check;
}

}  // namespace

void SetAbandonCheck(std::function<std::string()> check) {
  AbandonCheck() = std::move(check);
}

void WaitForCollective(c10d::Work& work) {
  const std::function<std::string()>& abandoned = AbandonCheck();
  if (!abandoned) {
    work.wait();
    return;
  }
  for (;;) {
    if (std::string why = abandoned(); !why.empty() && !work.isCompleted()) {
      throw GroupAbandoned(why);
    }
    try {
      work.wait(kSlice);
      return;
    } catch (const std::exception&) {
      // The slice ran out, or the work failed. Done by now (it may have
      // completed just after the slice ran out): a wait without a timeout
      // returns at once, or throws the work's own error.
      if (work.isCompleted()) {
        work.wait();
        return;
      }
    }
  }
}

void KeepAbandonedGroup(GroupPtr group) {
  static auto* kept = new std::vector<GroupPtr>();  // never destroyed: see the header
  kept->push_back(std::move(group));
}

}  // namespace trainctl::train
