#pragma once

namespace trainctl::train {

// Entry point of a rank process (`trainctl-worker rank ...`), spawned by the
// agent. Reads the serialized JobSpec from stdin, joins the job's process
// group through the coordinator's rendezvous, trains, and writes metric
// frames to file descriptor 3. Returns the process exit code: 0 on success,
// 1 when training failed (the reason is the last line on stderr), 2 on bad
// arguments. Kept free of torch headers so the agent's main need not see them.
int RankMain(int argc, char** argv);

}  // namespace trainctl::train
