#include "headless_chromium.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "local_cluster.h"

namespace trainctl::testing {
namespace {

constexpr char kChromium[] = "/usr/bin/chromium";

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string ChromiumUnusableReason(const std::string& dir) {
  if (access(kChromium, X_OK) != 0) {
    return std::string(kChromium) +
           " is not installed (deploy/install-deps.sh installs Debian's "
           "chromium)";
  }
  bool ok = false;
  const std::string probe =
      DumpDom(dir, "data:text/html,<p id=probe>hi</p>", 1000, &ok);
  if (!ok || probe.find("id=\"probe\"") == std::string::npos) {
    return "headless Chromium cannot run here: " + probe;
  }
  return "";
}

std::string DumpDom(const std::string& dir, const std::string& url,
                    int budget_ms, bool* ok) {
  static int runs = 0;
  const std::string base = dir + "/chromium-" + std::to_string(++runs);
  // Root (CI containers) needs --no-sandbox; a fresh profile per run keeps
  // runs independent. stdout (the DOM) and stderr go to separate files.
  const bool https = url.rfind("https://", 0) == 0;
  const std::string command =
      std::string(kChromium) +
      " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage"
      " --no-first-run --disable-extensions" +
      (https ? " --ignore-certificate-errors" : "") +
      " --user-data-dir=" + base + "-profile --virtual-time-budget=" +
      std::to_string(budget_ms) + " --dump-dom '" + url + "' >" + base +
      ".dom 2>" + base + ".err";
  Process chromium({"/bin/sh", "-c", command}, base + ".log");
  const int code = chromium.Wait(std::chrono::seconds(120));
  const std::string dom = ReadText(base + ".dom");
  *ok = code == 0 && dom.find("</html>") != std::string::npos;
  if (!*ok) return "exit " + std::to_string(code) + ": " + ReadText(base + ".err");
  return dom;
}

std::string Attribute(const std::string& dom, const std::string& id,
                      const std::string& attr) {
  const size_t at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "<no element #" + id + ">";
  const size_t open = dom.rfind('<', at), close = dom.find('>', at);
  const std::string tag = dom.substr(open, close - open);
  const size_t a = tag.find(" " + attr + "=\"");
  if (a == std::string::npos) return "<no " + attr + " on #" + id + ">";
  const size_t start = a + attr.size() + 3;
  return tag.substr(start, tag.find('"', start) - start);
}

}  // namespace trainctl::testing
