#include "common/webdataset_index.h"

#include <unistd.h>

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/data_probe.h"

namespace trainctl {
namespace {

constexpr int64_t kBlock = 512;
// Larger pax or GNU name records than this are not names.
constexpr int64_t kMaxNameRecord = 1 << 16;
constexpr int64_t kMaxLabelBytes = 32;

// An octal (or, with the high bit set, base-256) number field.
bool TarNumber(const char* field, size_t width, int64_t* out) {
  const auto* u = reinterpret_cast<const unsigned char*>(field);
  if (u[0] & 0x80) {
    int64_t value = 0;
    for (size_t i = 1; i < width; ++i) {
      if (value > (INT64_MAX >> 8)) return false;
      value = (value << 8) | u[i];
    }
    *out = value;
    return true;
  }
  int64_t value = 0;
  size_t i = 0;
  while (i < width && (field[i] == ' ' || field[i] == '\0')) ++i;
  bool any = false;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (value > (INT64_MAX >> 3)) return false;
    value = value * 8 + (field[i] - '0');
    any = true;
  }
  *out = value;
  return any;
}

bool ChecksumOk(const std::string& header) {
  int64_t stored = 0;
  if (!TarNumber(header.data() + 148, 8, &stored)) return false;
  int64_t sum = 0;
  for (int i = 0; i < kBlock; ++i) {
    sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(header[i]);
  }
  return sum == stored;
}

std::string Field(const std::string& header, size_t at, size_t width) {
  const size_t end = header.find('\0', at);
  return header.substr(at, std::min(width, (end == std::string::npos ? header.size() : end) - at));
}

// The "path" record of a pax extended header, if any.
std::string PaxPath(const std::string& records) {
  size_t pos = 0;
  while (pos < records.size()) {
    const size_t space = records.find(' ', pos);
    int64_t length = 0;
    if (space == std::string::npos ||
        !absl::SimpleAtoi(absl::string_view(records).substr(pos, space - pos), &length) ||
        length <= 0 || pos + length > records.size()) {
      return "";
    }
    const absl::string_view record =
        absl::string_view(records).substr(space + 1, pos + length - space - 2);
    if (absl::StartsWith(record, "path=")) return std::string(record.substr(5));
    pos += length;
  }
  return "";
}

}  // namespace

absl::StatusOr<std::vector<WebDatasetSample>> IndexWebDatasetTar(
    int fd, int64_t file_size, const std::string& field,
    const std::string& path, absl::Time deadline) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", path, ": ", why));
  };
  // As WebDataset groups them: a sample is a run of consecutive members
  // with one key, and ends where the key changes.
  struct Partial {
    std::string key;
    WebDatasetSample sample;
    bool has_image = false, has_label = false;
  };
  Partial p;
  int64_t keys = 0;  // runs seen, for naming a sample by position
  std::vector<WebDatasetSample> samples;
  auto finish = [&]() -> absl::Status {
    if (p.key.empty() || (!p.has_image && !p.has_label)) return absl::OkStatus();
    if (!p.has_image || !p.has_label) {
      return bad(absl::StrCat("sample ", keys - 1, " has ",
                              p.has_image ? "an image" : "a label", " but no ",
                              p.has_image ? ".cls label" : ".jpg/.png image",
                              " (a sample's members must be consecutive)"));
    }
    samples.push_back(p.sample);
    return absl::OkStatus();
  };
  std::string header, long_name;
  int64_t offset = 0, members = 0;
  bool ended = false;  // the end-of-archive block was seen
  while (offset + kBlock <= file_size) {
    if ((++members & 1023) == 0 && absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(field, ": ", path, ": indexing the tar took too long"));
    }
    if (!ReadFullyAt(fd, offset, kBlock, &header)) return bad("cannot read a tar header");
    if (header.find_first_not_of('\0') == std::string::npos) {
      ended = true;
      break;
    }
    if (!ChecksumOk(header)) {
      return bad(offset == 0 ? "not a tar file" : absl::StrCat(
          "tar header at byte ", offset, " is damaged"));
    }
    int64_t size = 0;
    if (!TarNumber(header.data() + 124, 12, &size) || size < 0) {
      return bad(absl::StrCat("tar header at byte ", offset, " has no size"));
    }
    const int64_t data = offset + kBlock;
    if (data + size > file_size) {
      return bad("ends inside a member (a file cut short, or still being written?)");
    }
    const char type = header[156];
    std::string name = Field(header, 0, 100);
    if (header.compare(257, 5, "ustar") == 0) {
      const std::string prefix = Field(header, 345, 155);
      if (!prefix.empty()) name = prefix + "/" + name;
    }
    if (type == 'L' || type == 'x') {
      if (size > kMaxNameRecord) return bad("has a name record over 64 KiB");
      std::string record;
      if (!ReadFullyAt(fd, data, static_cast<size_t>(size), &record)) {
        return bad("cannot read a name record");
      }
      long_name = type == 'L' ? record.substr(0, record.find('\0')) : PaxPath(record);
    } else if (type == '0' || type == '\0' || type == '7') {
      if (!long_name.empty()) name = long_name;
      long_name.clear();
      const size_t slash = name.rfind('/');
      const size_t dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
      if (dot != std::string::npos) {
        const std::string key = name.substr(0, dot);
        const std::string ext = absl::AsciiStrToLower(name.substr(dot + 1));
        if (key != p.key) {
          if (absl::Status done = finish(); !done.ok()) return done;
          p = Partial{key, {}, false, false};
          ++keys;
        }
        if (ext == "jpg" || ext == "jpeg" || ext == "png") {
          p.sample.image_offset = data;
          p.sample.image_size = size;
          p.sample.png = ext == "png";
          p.has_image = true;
        } else if (ext == "cls") {
          std::string text;
          if (size > kMaxLabelBytes || !ReadFullyAt(fd, data, static_cast<size_t>(size), &text) ||
              !absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &p.sample.label) ||
              p.sample.label < 0 || p.sample.label > INT32_MAX) {
            return bad(absl::StrCat("sample ", keys - 1, " has a .cls label that "
                                    "is not an integer in [0, 2^31-1]"));
          }
          p.has_label = true;
        }
      }
    } else {
      long_name.clear();  // directories, links: not samples
    }
    offset = data + (size + kBlock - 1) / kBlock * kBlock;
  }
  // Every writer ends a tar with zero blocks: without them the file was
  // cut short, possibly inside the padding of its last member.
  if (!ended) return bad("ends inside a member (a file cut short, or still being written?)");
  if (absl::Status done = finish(); !done.ok()) return done;
  if (samples.empty()) {
    return bad("holds no samples (members named KEY.jpg or KEY.png with KEY.cls)");
  }
  return samples;
}

}  // namespace trainctl
