#include "worker/support/http_client.h"

#include "absl/strings/str_cat.h"

#if TRAINCTL_HAVE_CURL
#include <curl/curl.h>

#include <mutex>
#endif

namespace trainctl {

#if TRAINCTL_HAVE_CURL
namespace {

size_t Append(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

std::string WithoutQuery(const std::string& url) { return url.substr(0, url.find('?')); }

class CurlHttpClient : public HttpClient {
 public:
  explicit CurlHttpClient(HttpClientOptions options) : options_(std::move(options)) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  }

  absl::StatusOr<HttpResponse> Send(const std::string& method, const std::string& url,
                                    const std::string& content_type,
                                    absl::string_view body) override {
    std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) return absl::InternalError("curl_easy_init failed");
    HttpResponse response;
    curl_slist* headers = nullptr;
    if (!content_type.empty()) {
      headers = curl_slist_append(headers, ("Content-Type: " + content_type).c_str());
    }
    if (!options_.authorization.empty()) {
      headers =
          curl_slist_append(headers, ("Authorization: " + options_.authorization).c_str());
    }
    CURL* c = curl.get();
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for timeouts
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(absl::ToInt64Milliseconds(options_.timeout)));
    if (!options_.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, options_.ca_file.c_str());
    if (!options_.verify) {
      curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    if (method != "GET") {
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Append);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &response.body);
    const CURLcode code = curl_easy_perform(c);
    curl_slist_free_all(headers);
    if (code != CURLE_OK) {
      return absl::UnavailableError(
          absl::StrCat(method, " ", WithoutQuery(url), ": ", curl_easy_strerror(code)));
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
    return response;
  }

 private:
  const HttpClientOptions options_;
};

}  // namespace

std::unique_ptr<HttpClient> MakeCurlHttpClient(HttpClientOptions options) {
  return std::make_unique<CurlHttpClient>(std::move(options));
}
#else
std::unique_ptr<HttpClient> MakeCurlHttpClient(HttpClientOptions) { return nullptr; }
#endif

}  // namespace trainctl
