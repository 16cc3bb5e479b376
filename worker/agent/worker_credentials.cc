#include "worker/agent/worker_credentials.h"

#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <thread>

#include <grpcpp/create_channel.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "common/pki.h"
#include "common/status_macros.h"
#include "trainctl/v1/workers.grpc.pb.h"

namespace trainctl::agent {
namespace {

// A kept certificate this close to expiry is replaced by joining again.
constexpr int64_t kRenewBeforeS = 30 * 86400;

absl::StatusOr<std::string> ReadFlagFile(const char* flag,
                                         const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": ", text.status().message()));
  }
  return text;
}

// OK when cert/key are a pair for `name`, issued by the CA and not expiring.
absl::Status CheckCertificate(const std::string& cert, const std::string& key,
                              const std::string& ca, const std::string& name) {
  RETURN_IF_ERROR(pki::VerifyKeyMatches(cert, key));
  RETURN_IF_ERROR(pki::VerifyIssuedBy(cert, ca));
  ASSIGN_OR_RETURN(pki::CertificateInfo info, pki::ReadCertificate(cert));
  if (info.common_name != name) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the certificate is for '", info.common_name, "', not --name '", name,
        "'"));
  }
  if (info.not_after_unix - int64_t(std::time(nullptr)) < kRenewBeforeS) {
    // Its own code: still usable, but due for renewal.
    return absl::OutOfRangeError("the certificate expires within 30 days");
  }
  return absl::OkStatus();
}

absl::Status WritePrivate(const std::string& path, const std::string& text) {
  AtomicWriteOptions options;
  options.mode = 0600;
  return WriteFileAtomically(path, text, options);
}

// Trades the join token for a certificate over server-only TLS.
absl::StatusOr<std::string> Join(const WorkerTlsOptions& options,
                                 const std::string& coordinator,
                                 const std::string& name,
                                 const std::string& ca,
                                 const std::string& key) {
  ASSIGN_OR_RETURN(std::string csr, pki::NewCertificateRequest(key, name));
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = ca;
  auto stub = v1::Workers::NewStub(
      grpc::CreateChannel(coordinator, grpc::SslCredentials(tls)));
  v1::JoinRequest request;
  request.set_join_token(options.join_token);
  request.set_name(name);
  request.set_csr_pem(csr);
  request.set_slots(options.slots);
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(options.join_wait_ms);
  int64_t backoff_ms = 200;
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::JoinResponse response;
    grpc::Status s = stub->Join(&ctx, request, &response);
    if (s.ok()) return response.cert_pem();
    const bool retry = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                       s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!retry || std::chrono::steady_clock::now() > give_up) {
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                          absl::StrCat("joining the cluster at ", coordinator,
                                       ": ", s.error_message()));
    }
    TLOG_WARNING << "joining " << coordinator << ": " << s.error_message()
                 << "; retrying in " << backoff_ms << " ms";
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms = std::min<int64_t>(backoff_ms * 2, 5'000);
  }
}

}  // namespace

absl::StatusOr<WorkerCredentials> ObtainCredentials(
    const WorkerTlsOptions& options, const std::string& coordinator,
    const std::string& name) {
  WorkerCredentials out;
  if (options.insecure) {
    TLOG_WARNING << "--insecure: talking to " << coordinator
                 << " in plaintext without a certificate";
    out.channel = grpc::InsecureChannelCredentials();
    return out;
  }
  if (options.ca_cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--ca-cert: required (the coordinator's tls/ca.crt), unless the "
        "coordinator runs --insecure and so does this worker");
  }
  ASSIGN_OR_RETURN(out.ca_pem, ReadFlagFile("--ca-cert", options.ca_cert_file));
  std::string cert, key;
  if (!options.cert_file.empty() || !options.key_file.empty()) {
    if (options.cert_file.empty() || options.key_file.empty()) {
      return absl::InvalidArgumentError("--cert and --key go together");
    }
    ASSIGN_OR_RETURN(cert, ReadFlagFile("--cert", options.cert_file));
    ASSIGN_OR_RETURN(key, ReadFlagFile("--key", options.key_file));
    if (absl::Status s = CheckCertificate(cert, key, out.ca_pem, name); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--cert ", options.cert_file, ": ", s.message()));
    }
  } else {
    const std::string cert_path = options.state_dir + "/worker.crt";
    const std::string key_path = options.state_dir + "/worker.key";
    absl::StatusOr<std::string> kept_cert = ReadWholeFile(cert_path);
    absl::StatusOr<std::string> kept_key = ReadWholeFile(key_path);
    const std::string slots_path = options.state_dir + "/worker.slots";
    absl::Status usable =
        kept_cert.ok() && kept_key.ok()
            ? CheckCertificate(*kept_cert, *kept_key, out.ca_pem, name)
            : absl::NotFoundError("no certificate kept yet");
    // The coordinator knows the slots of the last join: with more --slots
    // now, join again (same key) when the token is at hand.
    absl::StatusOr<std::string> kept_slots = ReadWholeFile(slots_path);
    const bool slots_changed =
        !kept_slots.ok() ||
        std::string(absl::StripAsciiWhitespace(*kept_slots)) !=
            absl::StrCat(options.slots);
    // Due for renewal but no token here (the deployment's join step has
    // it): keep working with it until that step renews it.
    const bool renewal_due = absl::IsOutOfRange(usable);
    if (renewal_due && options.join_token.empty()) {
      TLOG_WARNING << "the certificate in " << options.state_dir
                   << " expires within 30 days: run the join step "
                      "(trainctl-worker --join-only with the join token)";
    }
    if ((usable.ok() || renewal_due) &&
        (!(slots_changed || renewal_due) || options.join_token.empty())) {
      cert = *kept_cert;
      key = *kept_key;
    } else if (options.join_token.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no usable certificate in ", options.state_dir, " (",
          usable.message(), "): pass --join-token (the coordinator's "
          "auth/join.token) to obtain one, or --cert/--key"));
    } else {
      // Renewal keeps the key: the coordinator pins each name to the key it
      // first certified, so a new key could never renew (review M5).
      if (kept_key.ok() && pki::NewCertificateRequest(*kept_key, name).ok()) {
        key = *kept_key;
      } else {
        ASSIGN_OR_RETURN(key, pki::NewPrivateKey());
      }
      ASSIGN_OR_RETURN(cert, Join(options, coordinator, name, out.ca_pem, key));
      if (absl::Status s = CheckCertificate(cert, key, out.ca_pem, name); !s.ok()) {
        return absl::InternalError(absl::StrCat(
            "the coordinator's certificate for this worker is unusable: ",
            s.message()));
      }
      RETURN_IF_ERROR(MakeDirs(options.state_dir));
      if (chmod(options.state_dir.c_str(), 0700) != 0) {
        return absl::UnavailableError(absl::StrCat(
            "--state-dir ", options.state_dir, ": cannot make it private: ",
            std::strerror(errno)));
      }
      RETURN_IF_ERROR(WritePrivate(key_path, key));
      RETURN_IF_ERROR(WritePrivate(cert_path, cert));
      RETURN_IF_ERROR(WritePrivate(slots_path, absl::StrCat(options.slots, "\n")));
      TLOG_INFO << "joined the cluster; certificate kept in " << cert_path;
    }
  }
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = out.ca_pem;
  tls.pem_private_key = key;
  tls.pem_cert_chain = cert;
  out.channel = grpc::SslCredentials(tls);
  return out;
}

}  // namespace trainctl::agent
