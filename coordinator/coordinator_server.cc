#include "coordinator/coordinator_server.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "common/pki.h"
#include "coordinator/auth/cluster_files.h"
#include "common/status_macros.h"
#include "coordinator/sqlite_job_store.h"

namespace trainctl::coordinator {
namespace {

// Specs and log batches are small; this bounds what one bad client can make
// the coordinator buffer.
constexpr int kMaxMessageBytes = 16 << 20;
constexpr int kHandshakeTimeoutMs = 10'000;
// Sync-server threads: each agent stream, watch and rendezvous wait holds
// one (the async core that removes this bound is issue #16's).
constexpr int kMaxServerThreads = 4096;
// Shipped files no job names are deleted once nobody uploaded them for an
// hour (the upload comes before the submission that names the file).
constexpr auto kFileSweepPeriod = std::chrono::minutes(10);
constexpr auto kFileSweepMinAge = std::chrono::hours(1);

// A private directory for the shipped files of a coordinator without a
// state directory.
std::string MakeTemporaryDir() {
  const char* tmp = getenv("TMPDIR");
  std::string pattern = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                     "/trainctl-files-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    TLOG_ERROR << "cannot create a directory for shipped files in " << pattern;
  }
  return pattern;
}

// The host part of "HOST:PORT" / "[V6]:PORT", for the server certificate.
std::string ListenHost(const std::string& listen) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (host == "0.0.0.0" || host == "::" || host == "*") return "";
  return host;
}

absl::StatusOr<std::string> ReadTrimmed(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// The HTTP port serves HTTPS with the gRPC port's certificate (plain HTTP
// when insecure).
http::HttpServerOptions HttpOptions(const Security& security) {
  http::HttpServerOptions http;
  http.tls_cert_file = security.server_cert_file;
  http.tls_key_file = security.server_key_file;
  return http;
}

}  // namespace

Security Security::Insecure(std::string rendezvous_secret) {
  Security security;
  if (rendezvous_secret.empty()) rendezvous_secret = pki::RandomToken("");
  security.auth = std::make_unique<auth::Authenticator>(
      nullptr, std::move(rendezvous_secret));
  return security;
}

absl::StatusOr<Security> LoadSecurity(const CoordinatorOptions& options) {
  if (options.insecure) {
    if (options.state_dir.empty()) return Security::Insecure();
    // Kept, so ranks re-adopted after a restart still hold valid keys.
    auth::ClusterFiles files(options.state_dir);
    absl::StatusOr<std::string> secret = ReadTrimmed(files.rendezvous_key);
    if (!secret.ok()) {
      const std::string fresh = pki::RandomToken("");
      RETURN_IF_ERROR(MakeDirs(options.state_dir + "/auth"));
      chmod((options.state_dir + "/auth").c_str(), 0700);
      AtomicWriteOptions private_file;
      private_file.mode = 0600;
      RETURN_IF_ERROR(
          WriteFileAtomically(files.rendezvous_key, fresh, private_file));
      secret = fresh;
    }
    return Security::Insecure(*std::move(secret));
  }
  if (options.state_dir.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs a --state-dir for the cluster CA and tokens (or pass "
        "--insecure for plaintext without authentication)");
  }
  std::vector<std::string> names = options.server_names;
  if (std::string host = ListenHost(options.listen); !host.empty()) {
    names.push_back(host);
  }
  ASSIGN_OR_RETURN(auth::InitReport report,
                   auth::InitCluster(options.state_dir, names));
  for (const std::string& path : report.created) {
    TLOG_INFO << "created " << path;
  }
  auth::ClusterFiles files(options.state_dir);
  Security security;
  ASSIGN_OR_RETURN(security.ca.cert_pem, ReadWholeFile(files.ca_cert));
  ASSIGN_OR_RETURN(security.ca.key_pem, ReadWholeFile(files.ca_key));
  security.ca.workers_file = options.state_dir + "/auth/workers";
  ASSIGN_OR_RETURN(security.server_cert_pem, ReadWholeFile(files.server_cert));
  ASSIGN_OR_RETURN(security.server_key_pem, ReadWholeFile(files.server_key));
  security.server_cert_file = files.server_cert;
  security.server_key_file = files.server_key;
  ASSIGN_OR_RETURN(std::string secret, ReadTrimmed(files.rendezvous_key));
  security.auth = std::make_unique<auth::Authenticator>(
      std::make_unique<auth::TokenStore>(files.tokens), std::move(secret));
  return security;
}

std::string DefaultStateDir() {
  const char* xdg = getenv("XDG_STATE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return absl::StrCat(xdg, "/trainctl");
  const char* home = getenv("HOME");
  return absl::StrCat(home != nullptr ? home : ".", "/.local/state/trainctl");
}

std::string StateDatabasePath(const std::string& state_dir) {
  return absl::StrCat(state_dir, "/coordinator.db");
}

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Create(
    CoordinatorOptions options, const Clock& clock) {
  std::unique_ptr<JobStore> store;
  if (options.state_dir.empty()) {
    store = std::make_unique<InMemoryJobStore>();
  } else {
    std::error_code ec;
    if (!std::filesystem::is_directory(options.state_dir, ec)) {
      std::filesystem::create_directories(options.state_dir, ec);
      if (!ec) {
        // Job specs and logs may be private: owner only.
        std::filesystem::permissions(options.state_dir,
                                     std::filesystem::perms::owner_all,
                                     std::filesystem::perm_options::replace,
                                     ec);
      }
      if (ec) {
        return absl::UnavailableError(absl::StrCat(
            "cannot create the state directory ", options.state_dir, ": ",
            ec.message(), "; pass a writable --state-dir"));
      }
    }
    ASSIGN_OR_RETURN(store,
                     SqliteJobStore::Open(StateDatabasePath(options.state_dir)));
  }
  ASSIGN_OR_RETURN(Security security, LoadSecurity(options));
  return std::make_unique<CoordinatorServer>(std::move(options), clock,
                                             std::move(store),
                                             std::move(security));
}

CoordinatorServer::CoordinatorServer(CoordinatorOptions options,
                                     const Clock& clock,
                                     std::unique_ptr<JobStore> store,
                                     Security security)
    : options_(std::move(options)),
      clock_(clock),
      build_{options_.version, options_.grpc_version, options_.protobuf_version,
             clock_.NowUnixMs()},
      store_(store != nullptr ? std::move(store)
                              : std::make_unique<InMemoryJobStore>()),
      security_(security.auth != nullptr ? std::move(security)
                                         : Security::Insecure()),
      events_(
          [store = store_.get()](const std::string& job_id, int64_t from_seq,
                                 size_t max_events) {
            return store->ReadEvents(job_id, from_seq, max_events);
          },
          options_.event_tail_bytes),
      temporary_files_dir_(options_.state_dir.empty() ? MakeTemporaryDir() : ""),
      files_(options_.state_dir.empty() ? temporary_files_dir_
                                        : options_.state_dir + "/files",
             options_.max_file_bytes),
      rendezvous_journal_(*store_),
      rendezvous_(&rendezvous_journal_),
      jobs_(clock_, events_, rendezvous_, *store_, options_.lease_ms,
            options_.heartbeat_interval_ms),
      jobs_service_(jobs_, events_, files_, stopping_, *security_.auth,
                    options_.torchscript, build_),
      workers_service_(jobs_, *security_.auth, security_.ca),
      rendezvous_service_(rendezvous_, jobs_, files_, *security_.auth),
      http_routes_(jobs_, events_, rpc_stats_, clock_, stopping_,
                   security_.auth->HttpBearerCheck(), build_),
      http_server_(
          [this](const http::HttpRequest& request) {
            return http_routes_.Handle(request);
          },
          HttpOptions(security_)) {}

CoordinatorServer::~CoordinatorServer() {
  Shutdown();
  if (!temporary_files_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(temporary_files_dir_, ec);
  }
}

void CoordinatorServer::StoreRendezvousJournal::Erase(const std::string& job_id,
                                                      int generation,
                                                      const std::string& key) {
  // A key that comes back after a restart is harmless: c10d deletes only
  // keys it no longer reads.
  if (absl::Status s = store_.EraseRendezvousKey(job_id, generation, key);
      !s.ok()) {
    TLOG_WARNING << "cannot forget a rendezvous key of job " << job_id << ": "
                 << s.message();
  }
}

void CoordinatorServer::StoreRendezvousJournal::Drop(const std::string& job_id,
                                                     int below_generation) {
  // Kept keys of an ended generation are dropped again at the next start.
  if (absl::Status s = store_.DropRendezvous(job_id, below_generation);
      !s.ok()) {
    TLOG_WARNING << "cannot forget the rendezvous keys of job " << job_id
                 << ": " << s.message();
  }
}

absl::Status CoordinatorServer::RestoreRendezvous() {
  ASSIGN_OR_RETURN(std::vector<RendezvousRecord> records,
                   store_->LoadRendezvous());
  std::map<Rendezvous::Scope, std::map<std::string, std::string>> scopes;
  for (RendezvousRecord& r : records) {
    scopes[{r.job_id, r.generation}][std::move(r.key)] = std::move(r.value);
  }
  int restored = 0;
  for (auto& [scope, keys] : scopes) {
    absl::StatusOr<v1::Job> job = jobs_.Get(scope.job_id);
    if (job.ok() && job->state() == v1::JOB_STATE_RUNNING &&
        job->generation() == scope.generation) {
      rendezvous_.Restore(scope, std::move(keys));
      ++restored;
    } else {
      RETURN_IF_ERROR(store_->DropRendezvous(scope.job_id, scope.generation + 1));
    }
  }
  if (restored > 0) {
    TLOG_INFO << "restored the rendezvous keys of " << restored
              << " running generation" << (restored == 1 ? "" : "s");
  }
  return absl::OkStatus();
}

absl::Status CoordinatorServer::ReloadScheduling() {
  if (options_.scheduling_file.empty()) {
    return absl::FailedPreconditionError(
        "no --scheduling file to reload: the built-in policy stays");
  }
  absl::StatusOr<SchedulingConfig> config =
      LoadSchedulingConfig(options_.scheduling_file);
  if (!config.ok()) return config.status();
  jobs_.SetSchedulingConfig(*std::move(config));
  return absl::OkStatus();
}

absl::StatusOr<int> CoordinatorServer::Start() {
  JobManager::Retention retention;
  retention.max_finished_jobs = options_.keep_finished_jobs;
  retention.max_age_ms = options_.keep_finished_days * 24 * 3600 * 1000;
  jobs_.SetRetention(retention);
  // Before Recover: the stored jobs' usage decays at its half-life.
  if (!options_.scheduling_file.empty()) RETURN_IF_ERROR(ReloadScheduling());
  RETURN_IF_ERROR(jobs_.Recover());
  RETURN_IF_ERROR(RestoreRendezvous());
  // Reflection's streams are unauthenticated and each holds a server
  // thread: only on request (grpcurl and friends).
  if (options_.reflection) {
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  }
  // grpc.health.v1.Health (libgrpc++'s built-in implementation): what the
  // Kubernetes `grpc:` probes and load balancers ask. The server starts only
  // after Recover() succeeded, so SERVING means the jobs are loaded.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  std::shared_ptr<grpc::ServerCredentials> credentials;
  if (security_.server_cert_pem.empty()) {
    TLOG_WARNING << "--insecure: plaintext gRPC and HTTP and NO "
                    "authentication; anyone who reaches "
                 << options_.listen
                 << " can run code on every worker. Use it on loopback only.";
    credentials = grpc::InsecureServerCredentials();
  } else {
    grpc::SslServerCredentialsOptions tls(
        // People authenticate with tokens and have no certificate; a worker's
        // certificate, when one is sent, must verify against the cluster CA.
        GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
    tls.pem_root_certs = security_.ca.cert_pem;
    tls.pem_key_cert_pairs.push_back(
        {security_.server_key_pem, security_.server_cert_pem});
    credentials = grpc::SslServerCredentials(tls);
    credentials->SetAuthMetadataProcessor(security_.auth->MetadataProcessor());
  }
  builder.AddListeningPort(options_.listen, credentials, &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  // A connection that has not finished its TLS and HTTP/2 handshake by then
  // is closed, so half-open clients cost an fd for seconds, not minutes.
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             kHandshakeTimeoutMs);
  // Every call of the sync server holds a thread (agent streams, watches,
  // rendezvous waits): past this many, new calls are refused with
  // RESOURCE_EXHAUSTED instead of the process running out of threads.
  grpc::ResourceQuota quota("trainctl-coordinator");
  quota.SetMaxThreads(kMaxServerThreads);
  builder.SetResourceQuota(quota);
  // A connection may not open streams without bound, nor idle for ever.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 256);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 30 * 60 * 1000);
  builder.RegisterService(&jobs_service_);
  builder.RegisterService(&workers_service_);
  builder.RegisterService(&rendezvous_service_);
  // Counts and times every call for /metrics, outside the handlers.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(rpc_stats_.InterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options_.listen,
        " (address in use, or not an address of this host?)"));
  }
  // "" (the whole server) is SERVING from the start; name each service too,
  // so a check for one of them is answered rather than NOT_FOUND.
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  for (const char* service :
       {v1::Jobs::service_full_name(), v1::Workers::service_full_name(),
        v1::Rendezvous::service_full_name()}) {
    health->SetServingStatus(service, true);
  }
  if (!options_.http_listen.empty()) {
    absl::StatusOr<int> http_port = http_server_.Start(options_.http_listen);
    if (!http_port.ok()) {
      server_->Shutdown();
      server_->Wait();
      server_.reset();
      return http_port.status();
    }
    http_port_ = *http_port;
    TLOG_INFO << (security_.server_cert_file.empty() ? "HTTP" : "HTTPS")
              << " (/metrics, /healthz, dashboard) on port " << http_port_
              << (security_.auth->insecure() ? ", no authentication"
                                             : ", bearer tokens required");
  }
  // Agents can reach us from here on: their time to re-attach starts now.
  jobs_.StartReattachWindow();
  lease_thread_ = std::thread([this] { LeaseLoop(); });
  TLOG_INFO << "coordinator listening on port " << port;
  return port;
}

void CoordinatorServer::Shutdown() {
  if (stopping_.exchange(true)) return;
  // NOT_SERVING for every service at once, so probes and balancers stop
  // sending work during the shutdown grace below; Check calls still answer.
  if (server_) server_->GetHealthCheckService()->Shutdown();
  {
    std::lock_guard<std::mutex> lock(lease_mu_);
  }
  lease_cv_.notify_all();
  if (lease_thread_.joinable()) lease_thread_.join();
  jobs_.PrepareForShutdown();
  rendezvous_.Shutdown();
  events_.WakeAll();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(2));
    server_->Wait();
  }
  // Last, so /healthz answers 503 through the gRPC grace period above.
  http_server_.Shutdown();
  if (absl::Status s = jobs_.Flush(); !s.ok()) {
    TLOG_ERROR << "could not record the last job changes: " << s.message();
  }
}

void CoordinatorServer::LeaseLoop() {
  const auto period = std::chrono::milliseconds(
      std::max<int64_t>(50, options_.lease_ms / 4));
  auto next_sweep = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(lease_mu_);
  while (!stopping_.load()) {
    lease_cv_.wait_for(lock, period, [this] { return stopping_.load(); });
    if (stopping_.load()) break;
    lock.unlock();
    jobs_.CheckLeases();
    if (std::chrono::steady_clock::now() >= next_sweep) {
      SweepFiles();
      next_sweep = std::chrono::steady_clock::now() + kFileSweepPeriod;
    }
    lock.lock();
  }
}

void CoordinatorServer::SweepFiles() {
  std::set<std::string> referenced;
  for (const v1::Job& job : jobs_.List({})) {
    for (const v1::ShippedFile& file : job.spec().shipped_files()) {
      referenced.insert(file.sha256());
    }
  }
  const int removed = files_.Sweep(referenced, kFileSweepMinAge);
  if (removed > 0) {
    TLOG_INFO << "deleted " << removed << " shipped file"
              << (removed == 1 ? "" : "s") << " no kept job names";
  }
}

}  // namespace trainctl::coordinator
