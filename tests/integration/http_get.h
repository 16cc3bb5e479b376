#pragma once

// A minimal HTTP/1.1 GET over loopback for the tests, plain or HTTPS
// (OpenSSL), so they check the coordinator's HTTP port without a client
// library.

#include <string>

namespace trainctl::testing {

struct HttpResult {
  int status = 0;  // 0: no well-formed response
  std::string headers;
  std::string body;
  std::string error;  // why status is 0: connect or TLS failure
};

struct HttpClientOptions {
  bool tls = false;  // https: TLS 1.2 or newer
  // With tls: the PEM certificate(s) to verify the server against, for the
  // address 127.0.0.1. Empty: no verification (curl -k).
  std::string ca_file;
  std::string bearer_token;  // sent as "Authorization: Bearer TOKEN"
  int timeout_ms = 10'000;   // for connecting, and for each read and write
};

// GET http(s)://127.0.0.1:<port><target> with a bounded wait for the reply.
HttpResult HttpGet(int port, const std::string& target,
                   const HttpClientOptions& options = {});

// Polls `path` (bounded) until it holds a port number; 0 on timeout.
int ReadPortFile(const std::string& path, int timeout_ms = 30'000);

}  // namespace trainctl::testing
