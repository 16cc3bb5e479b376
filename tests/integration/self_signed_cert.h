#pragma once

// A throwaway server certificate for tests of the HTTPS port, made with the
// OpenSSL API (no openssl command needed).

#include <string>

namespace trainctl::testing {

struct PemFiles {
  std::string cert;
  std::string key;
};

// A self-signed certificate for 127.0.0.1 with a fresh P-256 key, valid
// for a day, written as PEM files `name`.crt and `name`.key into `dir`.
// Fails the current test if OpenSSL refuses a step.
PemFiles WriteSelfSigned(const std::string& dir, const std::string& name);

}  // namespace trainctl::testing
