#pragma once

// How a rank waits for its collectives and its point-to-point transfers.
//
// A plain wait, unless the rank installs an abandon check (rank_main.cc
// does for an in-place job on the CPU): the coordinator may find a peer
// lost that the collective cannot see, a node cut off without a TCP reset,
// whose peers would otherwise wait for the collective timeout, and tell
// the rank's agent to make it give the group up. Then a collective's wait
// goes in short slices, a transfer's on a thread of its own, and either
// throws GroupAbandoned as soon as the check says so.

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "worker/train/torch_compat.h"

namespace trainctl::train {

class GroupAbandoned : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// Why the rank's current group is to be given up, or "" while it is not.
// Set once, before the first collective; read by whichever thread waits.
void SetAbandonCheck(std::function<std::string()> check);

// Waits for `work` as Work::wait() does (rethrowing its error), or throws
// GroupAbandoned once the abandon check says so while it is not done.
void WaitForCollective(c10d::Work& work);

// Waits for point-to-point works (sends and receives), as WaitForCollective
// does for a collective, and clears `works`. Gloo's send and receive works
// complete only inside wait(), and one whose timed wait runs out closes its
// pair, so they are not waited in slices: a thread waits for them, and this
// one asks the check. Abandoned, each work is aborted (its wait returns)
// and kept, with the buffer it was posted on, until the process ends: a
// receive stays posted on its pair, and a partition that heals could still
// write into it. Whatever a caller receives into must therefore be a
// stand-in it may lose, never live state.
void WaitForPointToPoint(std::vector<WorkPtr>& works);

// An abandoned group still has a collective in flight on its own threads:
// destroying it would wait for that to time out. Kept alive, unused, until
// the process ends.
void KeepAbandonedGroup(GroupPtr group);

}  // namespace trainctl::train
