#pragma once

// The request side of the coordinator's small HTTP/1.1 server: what a
// request head parses into, and the parser, kept pure so the limits and the
// garbage handling are unit-tested without sockets.

#include <cstddef>
#include <map>
#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

namespace trainctl::coordinator::http {

// Hard limits on what a client may send. A request over them is answered
// with an error status and closed; nothing is buffered beyond them.
inline constexpr size_t kMaxHeadBytes = 8192;  // request line + headers
inline constexpr size_t kMaxTargetBytes = 2048;
inline constexpr int kMaxHeaders = 64;

struct HttpRequest {
  std::string method;  // GET or HEAD: nothing else is served
  std::string path;    // percent-decoded, without the query
  std::map<std::string, std::string> query;  // decoded; last value wins
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones
};

// Parses a request head (request line and headers, up to and including the
// blank line). Returns 0 and fills `out`, or the HTTP status to answer with:
// 400 malformed, 405 a method other than GET/HEAD, 414 target too long,
// 431 too many headers, 505 not HTTP/1.x. A request that announces a body
// is refused (400): GET bodies are never read, so they cannot desync the
// connection.
int ParseRequestHead(absl::string_view head, HttpRequest* out);

// Offset just past the blank line ending a head in `data`, or npos while it
// is incomplete. Accepts CRLF and bare LF line ends.
size_t FindHeadEnd(absl::string_view data);

// "%41b+c" -> "Ab c" in query values ('+' is a space only there); false on
// a malformed escape.
bool PercentDecode(absl::string_view in, bool plus_is_space, std::string* out);

// A response as bytes: status line, Content-Type, Content-Length,
// Connection: close, no caching, the extra headers, then the body (left out
// for HEAD).
std::string SerializeResponse(const HttpResponse& response, bool head_only);

// "OK", "Not Found", ...
const char* ReasonPhrase(int status);

}  // namespace trainctl::coordinator::http
