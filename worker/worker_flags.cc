// trainctl-worker's flags (WorkerFlags, worker_node.h).

#include <CLI/CLI.hpp>

#include "worker/worker_node.h"

namespace trainctl::worker {

void AddWorkerFlags(CLI::App& app, WorkerFlags& flags) {
  app.add_option("--coordinator", flags.agent.coordinator,
                 "coordinator address HOST:PORT")
      ->capture_default_str()
      ->envname("TRAINCTL_COORDINATOR");
  app.add_option("--slots", flags.agent.slots, "rank slots this node offers")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--gpus", flags.gpus,
                 "GPUs for the slots, one each: auto (those "
                 "CUDA_VISIBLE_DEVICES lists, else every /dev/nvidiaN), none, "
                 "or CUDA device ids such as 0,1,3; a GPU job's ranks run "
                 "only on slots with one")
      ->capture_default_str()
      ->envname("TRAINCTL_GPUS");
  app.add_option("--name", flags.agent.name,
                 "unique worker name (default: the hostname)");
  app.add_option("--cpus", flags.agent.cpus,
                 "cores shared by this node's ranks (default: all); each rank "
                 "gets cpus/slots intra-op threads unless the spec says")
      ->check(CLI::Range(0, 4096));
  app.add_option("--collective-host", flags.agent.collective_host,
                 "address other ranks reach this node's ranks at; it must be "
                 "an address of this node, ranks bind it (default: the local "
                 "address this node reaches the coordinator from; 127.0.0.1 "
                 "for a loopback coordinator)");
  app.add_option("--kill-grace-ms", flags.agent.kill_grace_ms,
                 "after SIGTERM, wait this long before SIGKILL")
      ->capture_default_str();
  app.add_option("--ca-cert", flags.tls.ca_cert_file,
                 "the cluster CA certificate (the coordinator's tls/ca.crt)")
      ->envname("TRAINCTL_CA_CERT");
  app.add_option("--join-token", flags.tls.join_token,
                 "the cluster's join token (the coordinator's "
                 "auth/join.token), traded once for this worker's certificate")
      ->envname("TRAINCTL_JOIN_TOKEN");
  app.add_option("--join-token-file", flags.join_token_file,
                 "read the join token from this file instead (whitespace "
                 "around it is ignored), so that it appears in no process "
                 "list or environment")
      ->envname("TRAINCTL_JOIN_TOKEN_FILE");
  app.add_option("--cert", flags.tls.cert_file,
                 "this worker's certificate, signed by the cluster CA and "
                 "named after --name (instead of --join-token)");
  app.add_option("--key", flags.tls.key_file, "the private key of --cert");
  app.add_option("--state-dir", flags.tls.state_dir,
                 "where a joined certificate is kept (created 0700); one "
                 "worker at a time (default: "
                 "$XDG_STATE_HOME/trainctl-worker/NAME, else "
                 "~/.local/state/trainctl-worker/NAME)");
  app.add_option("--data-cache-dir", flags.data_cache_dir,
                 "where ranks keep decoded copies of gzip-compressed data "
                 "files, so the next job on them starts without inflating "
                 "them again (default: STATE_DIR/data-cache)");
  app.add_option("--data-cache-mb", flags.agent.data_cache_mb,
                 "most disk the decoded copies may use, least recently used "
                 "dropped first; 0 turns the cache off")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--standby-heap-mb", flags.agent.standby_heap_mb,
                 "heap each waiting rank process maps in advance, so that a "
                 "job's first step does not page-fault (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--health-listen", flags.health_listen,
                 "HOST:PORT to serve grpc.health.v1.Health on (plaintext, for "
                 "probes: SERVING while registered with the coordinator); "
                 "port 0 picks a free port; empty (the default) serves none");
  app.add_option("--health-port-file", flags.health_port_file,
                 "write the bound health port to this file once serving");
  app.add_flag("--insecure", flags.tls.insecure,
               "plaintext and no certificate, for a coordinator run with "
               "--insecure (a demo on loopback)");
  app.add_flag("--join-only", flags.join_only,
               "obtain (or renew) this worker's certificate with the join "
               "token, keep it in --state-dir and exit: run it as a "
               "separate step so the agent and its ranks never hold the "
               "token");
  app.add_option("--rank-user", flags.rank_user,
                 "run rank processes as this user (the worker must run as "
                 "root): a job's code then cannot read the worker's key, "
                 "state directory or join token")
      ->envname("TRAINCTL_RANK_USER");
  app.add_flag("--allow-root-ranks", flags.allow_root_ranks,
               "as root without --rank-user, run job code as root anyway "
               "(without it such a worker refuses to start)")
      ->envname("TRAINCTL_ALLOW_ROOT_RANKS");}

}  // namespace trainctl::worker
