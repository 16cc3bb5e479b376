// The observability port's HTTP server: the request parser's limits, and a
// real server on loopback fed garbage, truncated and half-open connections,
// which must keep serving well-formed requests throughout.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <mutex>
#include <condition_variable>

#include "coordinator/http/http_request.h"
#include "coordinator/http/http_server.h"

namespace trainctl::coordinator::http {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST(ParseRequestHead, ParsesPathQueryAndHeaders) {
  HttpRequest r;
  ASSERT_EQ(ParseRequestHead("GET /api/jobs/job%2D1/events?from_seq=5&x=a+b%21 "
                             "HTTP/1.1\r\nHost: h\r\nX-Y:  v \r\n\r\n",
                             &r),
            0);
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.path, "/api/jobs/job-1/events");
  EXPECT_EQ(r.query["from_seq"], "5");
  EXPECT_EQ(r.query["x"], "a b!");
  ASSERT_EQ(r.headers.size(), 2u);
  EXPECT_EQ(r.headers[1].first, "x-y");
  EXPECT_EQ(r.headers[1].second, "v");
  EXPECT_EQ(ParseRequestHead("HEAD / HTTP/1.0\n\n", &r), 0);
}

TEST(ParseRequestHead, RefusesWhatItDoesNotServe) {
  HttpRequest r;
  EXPECT_EQ(ParseRequestHead("POST /metrics HTTP/1.1\r\n\r\n", &r), 405);
  EXPECT_EQ(ParseRequestHead("GET /metrics HTTP/2.0\r\n\r\n", &r), 505);
  EXPECT_EQ(ParseRequestHead("GET /metrics SPDY\r\n\r\n", &r), 400);
  EXPECT_EQ(ParseRequestHead("\x16\x03\x01\x02\x00\r\n\r\n", &r), 400);
  EXPECT_EQ(ParseRequestHead("GET metrics HTTP/1.1\r\n\r\n", &r), 400);
  EXPECT_EQ(ParseRequestHead("GET /a b HTTP/1.1\r\n\r\n", &r), 400);
  EXPECT_EQ(ParseRequestHead("GET /%zz HTTP/1.1\r\n\r\n", &r), 400);
  EXPECT_EQ(ParseRequestHead("GET /%00 HTTP/1.1\r\n\r\n", &r), 400);
  EXPECT_EQ(ParseRequestHead("GET /a%4 HTTP/1.1\r\n\r\n", &r), 400);
  EXPECT_EQ(ParseRequestHead("GET / HTTP/1.1\r\nno colon\r\n\r\n", &r), 400);
  EXPECT_EQ(ParseRequestHead("GET / HTTP/1.1\r\n folded: x\r\n\r\n", &r), 400);
  EXPECT_EQ(ParseRequestHead("GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n", &r),
            400);
  EXPECT_EQ(
      ParseRequestHead("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &r),
      400);
  EXPECT_EQ(ParseRequestHead("GET /" + std::string(kMaxTargetBytes, 'a') +
                                 " HTTP/1.1\r\n\r\n",
                             &r),
            414);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i <= kMaxHeaders; ++i) many += "h" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(ParseRequestHead(many + "\r\n", &r), 431);
}

TEST(FindHeadEnd, FindsTheBlankLine) {
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\nA: b\r\n"), std::string::npos);
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\n\r\nrest"), 18u);
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\n\nrest"), 16u);
}

// A loopback client socket; -1 on failure.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Everything the server sends until it closes, or until `timeout`.
std::string ReadAll(int fd, milliseconds timeout) {
  std::string out;
  const auto deadline = steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(
        deadline - steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, n);
  }
  return out;
}

std::string Exchange(int port, const std::string& bytes,
                     milliseconds timeout = milliseconds(3000)) {
  const int fd = Connect(port);
  if (fd < 0) return "connect failed";
  send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::string reply = ReadAll(fd, timeout);
  close(fd);
  return reply;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerOptions options;
    options.head_timeout_ms = 600;
    options.max_connections = 64;
    options.max_connections_per_client = 64;  // these tests are one client
    server_ = std::make_unique<HttpServer>(
        [](const HttpRequest& r) {
          return HttpResponse{200, "text/plain", "hello " + r.path, {}};
        },
        options);
    absl::StatusOr<int> port = server_->Start("127.0.0.1:0");
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }

  // A well-formed request, answered quickly.
  void ExpectServes() {
    const auto start = steady_clock::now();
    const std::string reply = Exchange(port_, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(reply.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << reply;
    EXPECT_NE(reply.find("\r\n\r\nhello /ok"), std::string::npos) << reply;
    EXPECT_LT(steady_clock::now() - start, milliseconds(500));
  }

  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(HttpServerTest, AnswersGarbageWithErrorsAndKeepsServing) {
  ExpectServes();
  EXPECT_EQ(Exchange(port_, "garbage\r\n\r\n").rfind("HTTP/1.1 400 ", 0), 0u);
  EXPECT_EQ(Exchange(port_, "DELETE /x HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405 ", 0),
            0u);
  // A head with no end, over the limit: refused without buffering more.
  const std::string big(kMaxHeadBytes + 100, 'A');
  EXPECT_EQ(Exchange(port_, big).rfind("HTTP/1.1 431 ", 0), 0u);
  // Binary noise, NULs and bytes >= 0x80 included.
  std::string binary;
  for (int i = 0; i < 3000; ++i) binary.push_back(static_cast<char>(i * 37));
  EXPECT_EQ(Exchange(port_, binary + "\r\n\r\n").rfind("HTTP/1.1 400 ", 0), 0u);
  // HEAD gets the headers without the body.
  const std::string head = Exchange(port_, "HEAD /ok HTTP/1.1\r\n\r\n");
  EXPECT_NE(head.find("Content-Length: 9\r\n"), std::string::npos);
  EXPECT_EQ(head.find("hello"), std::string::npos);
  ExpectServes();
}

TEST_F(HttpServerTest, TruncatedAndHalfOpenConnectionsDoNotBlockOthers) {
  // Clients that connect and send nothing, or half a head, and hold on.
  std::vector<int> idle;
  for (int i = 0; i < 30; ++i) {
    const int fd = Connect(port_);
    ASSERT_GE(fd, 0);
    if (i % 2 == 0) {
      const std::string part = "GET /slow HTTP/1.1\r\nHost: x\r\n";
      send(fd, part.data(), part.size(), MSG_NOSIGNAL);
    }
    idle.push_back(fd);
  }
  ExpectServes();
  ExpectServes();
  // A truncated request whose client then closes its side is dropped.
  const int fd = Connect(port_);
  send(fd, "GET /half", 9, MSG_NOSIGNAL);
  shutdown(fd, SHUT_WR);
  EXPECT_EQ(ReadAll(fd, milliseconds(2000)), "");
  close(fd);
  // The slow ones are timed out (408) and closed by the server.
  for (int fd2 : idle) {
    const std::string reply = ReadAll(fd2, milliseconds(3000));
    EXPECT_EQ(reply.rfind("HTTP/1.1 408 ", 0), 0u) << reply;
    close(fd2);
  }
  ExpectServes();
}

TEST(HttpServerLimits, RefusesConnectionsOverTheLimitAndRejectsBadAddresses) {
  HttpServerOptions options;
  options.max_connections = 4;
  HttpServer server(
      [](const HttpRequest&) { return HttpResponse{200, "text/plain", "x", {}}; },
      options);
  absl::StatusOr<int> port = server.Start("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(Connect(*port));
  // Let the poll thread accept the four before the fifth arrives.
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(Exchange(*port, "GET / HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 503 ", 0), 0u);
  for (int fd : idle) close(fd);
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(Exchange(*port, "GET / HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200 ", 0), 0u);
  // Shutdown with a connection still open returns promptly.
  const int open_fd = Connect(*port);
  const auto start = steady_clock::now();
  server.Shutdown();
  EXPECT_LT(steady_clock::now() - start, milliseconds(2000));
  close(open_fd);

  HttpServer bad([](const HttpRequest&) { return HttpResponse{}; });
  EXPECT_FALSE(bad.Start("no-port").ok());
  EXPECT_FALSE(bad.Start("127.0.0.1:99999").ok());
}

// One client address may hold only its share of the connections, so an
// unauthenticated client cannot lock out the others (the k8s probe).
TEST(HttpServerLimits, OneClientCannotTakeEveryConnection) {
  HttpServerOptions options;
  options.max_connections = 8;
  options.max_connections_per_client = 2;
  HttpServer server(
      [](const HttpRequest&) { return HttpResponse{200, "text/plain", "x", {}}; },
      options);
  absl::StatusOr<int> port = server.Start("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  std::vector<int> idle = {Connect(*port), Connect(*port)};
  // Refused once the poll thread holds the two idle ones (bounded wait).
  std::string refused;
  for (const auto deadline = steady_clock::now() + milliseconds(5000);
       steady_clock::now() < deadline;) {
    refused = Exchange(*port, "GET / HTTP/1.1\r\n\r\n");
    if (refused.rfind("HTTP/1.1 503 ", 0) == 0) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(refused.rfind("HTTP/1.1 503 ", 0), 0u) << refused;
  // Another client (another loopback address) is served meanwhile.
  const int other = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl(0x7f000002);  // 127.0.0.2
  ASSERT_EQ(bind(other, reinterpret_cast<sockaddr*>(&from), sizeof(from)), 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(*port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(other, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
  const std::string request = "GET / HTTP/1.1\r\n\r\n";
  send(other, request.data(), request.size(), MSG_NOSIGNAL);
  EXPECT_EQ(ReadAll(other, milliseconds(5000)).rfind("HTTP/1.1 200 ", 0), 0u);
  close(other);
  for (int fd : idle) close(fd);
}

// /healthz (the kubelet's probe) has a thread of its own: it is answered
// while every handler thread is busy with slow requests.
TEST(HttpServerLimits, HealthzIsAnsweredWhileEveryHandlerIsBusy) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  int busy = 0;
  HttpServerOptions options;
  options.handler_threads = 1;
  HttpServer server(
      [&](const HttpRequest& r) {
        if (r.path == "/slow") {
          std::unique_lock<std::mutex> lock(mu);
          ++busy;
          cv.notify_all();
          cv.wait(lock, [&] { return release; });
        }
        return HttpResponse{200, "text/plain", "ok " + r.path, {}};
      },
      options);
  absl::StatusOr<int> port = server.Start("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  const int slow = Connect(*port);
  const std::string request = "GET /slow HTTP/1.1\r\n\r\n";
  send(slow, request.data(), request.size(), MSG_NOSIGNAL);
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, milliseconds(5000), [&] { return busy == 1; }));
  }
  const std::string health = Exchange(*port, "GET /healthz HTTP/1.1\r\n\r\n");
  EXPECT_EQ(health.rfind("HTTP/1.1 200 ", 0), 0u) << health;
  EXPECT_NE(health.find("ok /healthz"), std::string::npos);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  EXPECT_EQ(ReadAll(slow, milliseconds(5000)).rfind("HTTP/1.1 200 ", 0), 0u);
  close(slow);
}

}  // namespace
}  // namespace trainctl::coordinator::http
