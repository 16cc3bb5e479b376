#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "common/log.h"
#include "coordinator/agent_link.h"
#include "coordinator/job_store.h"
#include "coordinator/rendezvous.h"
#include "trainctl/v1/jobs.pb.h"
#include "trainctl/v1/workers.pb.h"

namespace trainctl::coordinator {

// What the coordinator's core decided to do about the world outside it.
// The core (JobCore) never performs any of it: it has no clock, no lock,
// no store, no event hub and no network. Its shell (JobManager) applies
// the changes in order under its lock, waits for the durable writes after
// releasing it, and only then sends the messages, so that no agent hears
// of a transition a crash could still undo.

// A message for one connected agent. `link` is the agent's stream as it
// registered (an opaque handle to the core); `worker` its name.
struct AgentMessage {
  std::shared_ptr<AgentLink> link;
  std::string worker;
  v1::CoordinatorMessage message;
};
using Outbox = std::vector<AgentMessage>;

// Changed jobs and new events (seq already stamped) as one store write.
struct SaveJobs {
  JobWrite write;
  Durability durability = Durability::kGrouped;
};
// A job was deleted: its records go, after every write before it.
struct DeleteJobRecords {
  std::string job_id;
};
// The checkpoint catalog gained or lost an entry.
struct CatalogPut {
  CheckpointRecord record;
};
struct CatalogDelete {
  std::string job_id;
  int64_t step = 0;
};
// An event for the job's watchers (seq stamped by the core); `published`
// for one that is already durable (a submission's first event).
struct EventAppended {
  std::string job_id;
  v1::JobEvent event;
  bool published = false;
};
// The job reached a final state: its watchers end after its last event.
struct EventsClosed {
  std::string job_id;
};
// The job was deleted: its history is dropped from memory.
struct EventsForgotten {
  std::string job_id;
};
// The rendezvous of a job's generations.
struct GenerationStarted {  // Rendezvous::ExpectWorld
  std::string job_id;
  int generation = 0;
  int world_size = 0;
};
struct GenerationsEnded {  // Rendezvous::EndGeneration: up to `generation`
  std::string job_id;
  int generation = 0;
};
struct RegroupPosted {  // Rendezvous::PostRegroup of generation `from`
  std::string job_id;
  int from = 0;
  std::map<int, Rendezvous::RegroupPlace> places;
};
struct JobRendezvousDropped {  // Rendezvous::DropJob
  std::string job_id;
};

using Change =
    std::variant<SaveJobs, DeleteJobRecords, CatalogPut, CatalogDelete,
                 EventAppended, EventsClosed, EventsForgotten,
                 GenerationStarted, GenerationsEnded, RegroupPosted,
                 JobRendezvousDropped>;

// A line for the coordinator's own log (stderr), which the shell writes:
// the core does no I/O, and its tests can read what it would have said.
struct LogLine {
  LogLevel level = LogLevel::kInfo;
  std::string text;
  const char* file = "";  // where the core said it
  int line = 0;
};

struct Effects {
  std::vector<Change> changes;  // in the order the core made them
  Outbox messages;              // sent once the changes are durable
  std::vector<LogLine> log;     // written (outside the lock) before them
  // Agents whose lease expired while their stream still looked open: the
  // shell ends their links after sending the messages.
  std::vector<std::shared_ptr<AgentLink>> disconnect;
  bool empty() const {
    return changes.empty() && messages.empty() && disconnect.empty() &&
           log.empty();
  }
};

}  // namespace trainctl::coordinator
