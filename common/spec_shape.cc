// The YAML event walk behind CheckSpecShape (spec_reader.h): duplicate and
// malformed keys, UTF-8, nesting and alias-expansion limits, before any
// tree is built.

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/spec_reader.h"

namespace trainctl {
namespace {

// Thrown from ShapeChecker to stop the parse at a hard limit.
struct ShapeLimit {
  std::string error;
};

// The event handler behind CheckSpecShape. It keeps one frame per open
// mapping or sequence, so the path of every event is known, and counts
// nodes as the tree would hold them once aliases are expanded.
class ShapeChecker : public YAML::EventHandler {
 public:
  explicit ShapeChecker(std::vector<std::string>* errors) : errors_(errors) {}

  int64_t dropped() const { return dropped_; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ > 1) {
      throw ShapeLimit{absl::StrCat(
          "spec: holds more than one YAML document (a second begins at line ",
          mark.line + 1, "); submit one job per file")};
    }
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    Count(1, mark);
    if (anchor) size_[anchor] = 1;
    if (AtKey()) {
      Error(MapPath(), "has an empty or null key", mark,
            "every key must be a field name");
    }
    Done();
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (open_.count(anchor)) {
      throw ShapeLimit{absl::StrCat(
          Path(), ": alias at line ", mark.line + 1,
          " refers to a node that contains it; an alias may only repeat a "
          "node that ends before it")};
    }
    Count(size_[anchor], mark);
    if (AtKey()) {
      auto it = scalar_.find(anchor);
      if (it != scalar_.end()) {
        Key(it->second, mark);
      } else {
        ComplexKey(mark);
      }
    }
    Done();
  }

  void OnScalar(const YAML::Mark& mark, const std::string& /*tag*/,
                YAML::anchor_t anchor, const std::string& value) override {
    Count(1, mark);
    if (anchor) {
      size_[anchor] = 1;
      scalar_[anchor] = value;
    }
    size_t bad = 0;
    if (AtKey()) {
      if (!IsValidUtf8(value, &bad)) {
        Utf8Error(MapPath(), "a key is", value, bad, mark);
      } else {
        Key(value, mark);
      }
    } else if (!IsValidUtf8(value, &bad)) {
      Utf8Error(Path(), "is", value, bad, mark);
    }
    Done();
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& /*tag*/,
                       YAML::anchor_t anchor,
                       YAML::EmitterStyle::value /*style*/) override {
    Open(false, anchor, mark);
  }
  void OnSequenceEnd() override { Close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string& /*tag*/,
                  YAML::anchor_t anchor,
                  YAML::EmitterStyle::value /*style*/) override {
    Open(true, anchor, mark);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Frame {
    bool is_map = false;
    YAML::anchor_t anchor = 0;
    int64_t nodes_before = 0;  // nodes counted before this one opened
    size_t index = 0;          // sequence: the item being read
    bool at_key = true;        // mapping: the next node is a key
    std::string key;           // mapping: the key of the value being read
    std::map<std::string, int> lines;  // mapping: line of each key seen
  };

  // The path of the node being read: "model.hidden[2]", or "spec" at the top.
  std::string Path() const { return PathOf(frames_.size()); }
  // The path of the innermost mapping (for problems with one of its keys).
  std::string MapPath() const { return PathOf(frames_.size() - 1); }
  std::string PathOf(size_t depth) const {
    std::string path;
    for (size_t i = 0; i < depth; ++i) {
      const Frame& f = frames_[i];
      if (!f.is_map) {
        absl::StrAppend(&path, "[", f.index, "]");
      } else {
        absl::StrAppend(&path, path.empty() ? "" : ".",
                        f.at_key ? "<key>" : Abbreviated(f.key));
      }
    }
    // A hostile spec can make the path itself huge; the start says enough.
    return path.empty() ? "spec" : Abbreviated(path, 120);
  }

  bool AtKey() const {
    return !frames_.empty() && frames_.back().is_map && frames_.back().at_key;
  }

  void Count(int64_t nodes, const YAML::Mark& mark) {
    nodes_ += nodes;
    if (nodes_ > kMaxSpecNodes) {
      throw ShapeLimit{absl::StrCat(
          "spec: has more than ", kMaxSpecNodes,
          " values, counting each alias as the values it repeats (at line ",
          mark.line + 1,
          "); a job spec needs a few hundred: leave out what it does not "
          "use, and aliases that repeat large parts")};
    }
  }

  void Open(bool is_map, YAML::anchor_t anchor, const YAML::Mark& mark) {
    const int64_t before = nodes_;
    Count(1, mark);
    if (AtKey()) ComplexKey(mark);
    if (frames_.size() >= static_cast<size_t>(kMaxSpecDepth)) {
      throw ShapeLimit{absl::StrCat(
          Path(), ": nested deeper than ", kMaxSpecDepth, " levels (line ",
          mark.line + 1, "); a job spec is at most 3 levels deep")};
    }
    Frame f;
    f.is_map = is_map;
    f.anchor = anchor;
    f.nodes_before = before;
    frames_.push_back(std::move(f));
    if (anchor) open_.insert(anchor);
  }

  void Close() {
    const Frame& f = frames_.back();
    if (f.anchor) {
      size_[f.anchor] = nodes_ - f.nodes_before;
      open_.erase(f.anchor);
    }
    frames_.pop_back();
    Done();
  }

  // A whole node was read: move the enclosing collection on.
  void Done() {
    if (frames_.empty()) return;
    Frame& f = frames_.back();
    if (!f.is_map) {
      ++f.index;
    } else if (f.at_key) {
      f.at_key = false;
    } else {
      f.at_key = true;
      f.key.clear();
    }
  }

  void Key(const std::string& key, const YAML::Mark& mark) {
    Frame& f = frames_.back();
    f.key = key;
    if (key.empty()) {
      Error(MapPath(), "has an empty key", mark,
            "every key must be a field name");
      return;
    }
    auto [it, first] = f.lines.emplace(key, mark.line + 1);
    if (!first) {
      const std::string map = MapPath();
      Push(absl::StrCat(map == "spec" ? "" : map + ".", Abbreviated(key),
                        ": is given twice (lines ", it->second, " and ",
                        mark.line + 1, "); keep one"));
    }
  }

  void ComplexKey(const YAML::Mark& mark) {
    Error(MapPath(), "has a list or mapping as a key", mark,
          "every key must be a field name");
  }

  void Utf8Error(const std::string& path, const std::string& what,
                 const std::string& value, size_t bad, const YAML::Mark& mark) {
    const auto byte = static_cast<unsigned char>(value[bad]);
    const char kHex[] = "0123456789abcdef";
    Error(path,
          absl::StrCat(what, " not valid UTF-8 (byte 0x",
                       std::string{kHex[byte >> 4], kHex[byte & 15]},
                       " at offset ", bad, " of the string)"),
          mark, "save the spec as UTF-8");
  }

  void Error(const std::string& path, const std::string& what,
             const YAML::Mark& mark, const std::string& advice) {
    Push(
        absl::StrCat(path, ": ", what, " at line ", mark.line + 1, "; ", advice));
  }

  // Keeps the first problems, leaving two lines of kMaxSpecErrors for a hard
  // limit and the count of the rest: 100 000 bad keys must not make a
  // message of megabytes.
  void Push(std::string error) {
    if (errors_->size() + 2 >= kMaxSpecErrors) {
      ++dropped_;
      return;
    }
    errors_->push_back(std::move(error));
  }

  std::vector<std::string>* errors_;
  std::vector<Frame> frames_;
  int64_t nodes_ = 0;
  int documents_ = 0;
  int64_t dropped_ = 0;
  std::map<YAML::anchor_t, int64_t> size_;        // nodes under each anchor
  std::map<YAML::anchor_t, std::string> scalar_;  // anchored scalars' text
  std::set<YAML::anchor_t> open_;                 // anchors still open
};

}  // namespace

bool IsValidUtf8(const std::string& s, size_t* bad_offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      *bad_offset = i;
      return false;
    }
    if (i + len > n) {
      *bad_offset = i;
      return false;
    }
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) {
        *bad_offset = i + k;
        return false;
      }
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF.
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      *bad_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

std::vector<std::string> CheckSpecShape(const std::string& text) {
  std::vector<std::string> errors;
  std::istringstream in(text);
  YAML::Parser parser(in);
  ShapeChecker checker(&errors);
  try {
    while (parser.HandleNextDocument(checker)) {
    }
  } catch (const ShapeLimit& limit) {
    // First: it is why the rest of the spec was not read.
    errors.insert(errors.begin(), limit.error);
  }
  if (checker.dropped() > 0) {
    errors.push_back(absl::StrCat("spec: ", checker.dropped(),
                                  " more problems like these not shown"));
  }
  return errors;
}

}  // namespace trainctl
