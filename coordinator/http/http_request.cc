#include "coordinator/http/http_request.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace trainctl::coordinator::http {
namespace {

// RFC 9110 token characters: what a header name may be made of.
bool IsTokenChar(unsigned char c) {
  if (std::isalnum(c)) return true;
  return absl::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) !=
         absl::string_view::npos;
}

bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

// Visible ASCII only: no controls, no spaces, no bytes >= 0x80 in a target.
bool IsVisible(absl::string_view s) {
  for (unsigned char c : s) {
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool PercentDecode(absl::string_view in, bool plus_is_space, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = HexValue(in[i + 1]);
      const int lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (plus_is_space && in[i] == '+') {
      out->push_back(' ');
    } else {
      out->push_back(in[i]);
    }
  }
  return true;
}

size_t FindHeadEnd(absl::string_view data) {
  const size_t crlf = data.find("\r\n\r\n");
  const size_t lf = data.find("\n\n");
  if (crlf == absl::string_view::npos && lf == absl::string_view::npos) {
    return absl::string_view::npos;
  }
  if (lf == absl::string_view::npos || (crlf != absl::string_view::npos &&
                                       crlf + 2 <= lf)) {
    return crlf + 4;
  }
  return lf + 2;
}

int ParseRequestHead(absl::string_view head, HttpRequest* out) {
  if (head.size() > kMaxHeadBytes) return 431;
  std::vector<absl::string_view> lines = absl::StrSplit(head, '\n');
  // Strip the CR of CRLF line ends; drop the empty lines after the head.
  for (auto& line : lines) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (lines.empty()) return 400;

  std::vector<absl::string_view> parts = absl::StrSplit(lines[0], ' ');
  if (parts.size() != 3) return 400;
  const absl::string_view method = parts[0], target = parts[1],
                         version = parts[2];
  if (!IsToken(method)) return 400;
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return absl::StartsWith(version, "HTTP/") ? 505 : 400;
  }
  if (target.size() > kMaxTargetBytes) return 414;
  if (target.empty() || target[0] != '/' || !IsVisible(target)) return 400;

  HttpRequest request;
  request.method = std::string(method);
  const size_t qmark = target.find('?');
  if (!PercentDecode(target.substr(0, qmark), false, &request.path)) return 400;
  if (request.path.find('\0') != std::string::npos) return 400;
  if (qmark != absl::string_view::npos) {
    for (absl::string_view pair :
         absl::StrSplit(target.substr(qmark + 1), '&', absl::SkipEmpty())) {
      const size_t eq = pair.find('=');
      std::string key, value;
      if (!PercentDecode(pair.substr(0, eq), true, &key)) return 400;
      if (eq != absl::string_view::npos &&
          !PercentDecode(pair.substr(eq + 1), true, &value)) {
        return 400;
      }
      request.query[key] = value;
    }
  }

  for (size_t i = 1; i < lines.size(); ++i) {
    if (static_cast<int>(request.headers.size()) >= kMaxHeaders) return 431;
    const absl::string_view line = lines[i];
    const size_t colon = line.find(':');
    // Obsolete line folding (a line starting with space) is refused too.
    if (colon == absl::string_view::npos || !IsToken(line.substr(0, colon))) {
      return 400;
    }
    std::string name = absl::AsciiStrToLower(line.substr(0, colon));
    std::string value(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    for (unsigned char c : value) {
      if (c < 0x20 && c != '\t') return 400;
    }
    if (name == "transfer-encoding" ||
        (name == "content-length" && value != "0")) {
      return 400;
    }
    request.headers.emplace_back(std::move(name), std::move(value));
  }
  // Only now: a malformed request with another method is a 400, not a 405.
  if (request.method != "GET" && request.method != "HEAD") return 405;
  *out = std::move(request);
  return 0;
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

std::string SerializeResponse(const HttpResponse& response, bool head_only) {
  std::string out = absl::StrCat(
      "HTTP/1.1 ", response.status, " ", ReasonPhrase(response.status),
      "\r\nContent-Type: ", response.content_type,
      "\r\nContent-Length: ", response.body.size(),
      "\r\nConnection: close\r\nCache-Control: no-store"
      "\r\nX-Content-Type-Options: nosniff\r\n");
  if (response.status == 405) absl::StrAppend(&out, "Allow: GET, HEAD\r\n");
  for (const auto& [name, value] : response.headers) {
    absl::StrAppend(&out, name, ": ", value, "\r\n");
  }
  absl::StrAppend(&out, "\r\n");
  if (!head_only) out += response.body;
  return out;
}

}  // namespace trainctl::coordinator::http
