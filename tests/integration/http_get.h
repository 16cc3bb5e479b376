#pragma once

// A minimal HTTP/1.1 GET over loopback for the integration tests, so they
// check the coordinator's HTTP port without a client library.

#include <string>

namespace trainctl::testing {

struct HttpResult {
  int status = 0;  // 0: no well-formed response
  std::string headers;
  std::string body;
};

// GET http://127.0.0.1:<port><target> with a bounded wait for the reply.
HttpResult HttpGet(int port, const std::string& target, int timeout_ms = 10'000);

// Polls `path` (bounded) until it holds a port number; 0 on timeout.
int ReadPortFile(const std::string& path, int timeout_ms = 30'000);

}  // namespace trainctl::testing
