#include "worker/train/collective_wait.h"

#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
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

// Point-to-point works being waited by a thread of their own.
struct PendingWorks {
  std::vector<WorkPtr> works;
  std::promise<void> done;
};

// Never destroyed: see WaitForPointToPoint.
void KeepAbandonedWorks(std::shared_ptr<PendingWorks> pending) {
  static auto* kept = new std::vector<std::shared_ptr<PendingWorks>>();
  static auto* mutex = new std::mutex();
  std::lock_guard<std::mutex> lock(*mutex);
  kept->push_back(std::move(pending));
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

void WaitForPointToPoint(std::vector<WorkPtr>& works) {
  const std::function<std::string()>& abandoned = AbandonCheck();
  if (!abandoned) {
    for (WorkPtr& work : works) work->wait();
    works.clear();
    return;
  }
  auto pending = std::make_shared<PendingWorks>();
  pending->works = std::move(works);
  works.clear();
  std::future<void> done = pending->done.get_future();
  // Detached, holding the works: it ends once they are done or aborted,
  // and an abort that does not wake it (a backend without one) costs a
  // thread, never this rank's recovery.
  std::thread([pending] {
    try {
      for (WorkPtr& work : pending->works) work->wait();
      pending->done.set_value();
    } catch (...) {
      pending->done.set_exception(std::current_exception());
    }
  }).detach();
  while (done.wait_for(kSlice) != std::future_status::ready) {
    std::string why = abandoned();
    if (why.empty()) continue;
    if (done.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready) break;
    for (WorkPtr& work : pending->works) {
      try {
        work->abort();
      } catch (const std::exception&) {
        // Not abortable: its wait ends with the group's timeout instead.
      }
    }
    KeepAbandonedWorks(std::move(pending));
    throw GroupAbandoned(why);
  }
  done.get();  // rethrows a work's error
}

void KeepAbandonedGroup(GroupPtr group) {
  static auto* kept = new std::vector<GroupPtr>();  // never destroyed: see the header
  kept->push_back(std::move(group));
}

}  // namespace trainctl::train
