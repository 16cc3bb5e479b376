#pragma once

// The dashboard's tests drive Debian's Chromium headless: load a URL, let
// the page's scripts run for a budget of virtual time, read the DOM back.

#include <string>

namespace trainctl::testing {

// Why Chromium cannot run here ("" when it can): not installed, or it
// cannot start (no sandbox support, missing libraries). Tests skip with it.
// Runs files into `dir`.
std::string ChromiumUnusableReason(const std::string& dir);

// Runs headless Chromium on `url` and returns the DOM after scripts ran for
// `budget_ms` of virtual time (the page's timers and fetches included).
// https URLs are loaded with --ignore-certificate-errors (test
// certificates are trusted by no browser). `ok` is false when Chromium did
// not produce a DOM; the result then says why. Its files go into `dir`.
std::string DumpDom(const std::string& dir, const std::string& url,
                    int budget_ms, bool* ok);

// The value of attribute `attr` on the element with id `id` in `dom`, or a
// "<no ...>" text naming what is missing.
std::string Attribute(const std::string& dom, const std::string& id,
                      const std::string& attr);

}  // namespace trainctl::testing
