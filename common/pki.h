#pragma once

// The small piece of X.509 the cluster needs, over OpenSSL: EC P-256 keys,
// certificate requests, a cluster CA that signs server and worker
// certificates, and the random tokens and digests the authentication uses.
// Everything is PEM text in and out, so callers never hold OpenSSL types.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace trainctl::pki {

// SHA-256 of the DER public key in a certificate request, hex.
absl::StatusOr<std::string> RequestKeyFingerprint(const std::string& csr_pem);

// A fresh EC P-256 private key (PKCS#8 PEM).
absl::StatusOr<std::string> NewPrivateKey();

// A certificate request for `common_name`, signed with `key_pem`.
absl::StatusOr<std::string> NewCertificateRequest(const std::string& key_pem,
                                                  const std::string& common_name);

// The common name the request asks for; INVALID_ARGUMENT when the PEM is
// not a request or its signature does not match its key.
absl::StatusOr<std::string> RequestCommonName(const std::string& csr_pem);

enum class Usage { kCertificateAuthority, kServer, kClient };

struct CertificateOrder {
  std::string common_name;
  Usage usage = Usage::kClient;
  // For servers: host names and IP addresses (both forms accepted; an entry
  // that parses as an IP address becomes an IP SAN).
  std::vector<std::string> alt_names;
  int64_t valid_days = 730;
};

// A self-signed CA certificate for `key_pem`.
absl::StatusOr<std::string> SelfSignedCa(const std::string& key_pem,
                                         const std::string& common_name,
                                         int64_t valid_days);

// A certificate for the public key of `subject_pem` (a private key or a
// certificate request), issued by the CA.
absl::StatusOr<std::string> IssueCertificate(const std::string& ca_cert_pem,
                                             const std::string& ca_key_pem,
                                             const std::string& subject_pem,
                                             const CertificateOrder& order);

struct CertificateInfo {
  std::string common_name;
  int64_t not_after_unix = 0;
};
absl::StatusOr<CertificateInfo> ReadCertificate(const std::string& cert_pem);

// OK when `cert_pem` was issued by the CA of `ca_cert_pem` and is valid now.
absl::Status VerifyIssuedBy(const std::string& cert_pem,
                            const std::string& ca_cert_pem);
// OK when the private key belongs to the certificate.
absl::Status VerifyKeyMatches(const std::string& cert_pem,
                              const std::string& key_pem);

// `prefix` followed by 32 random bytes in hex.
std::string RandomToken(absl::string_view prefix);
std::string Sha256Hex(absl::string_view data);
std::string HmacSha256Hex(absl::string_view key, absl::string_view data);
// Comparison whose time does not depend on where the inputs differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace trainctl::pki
