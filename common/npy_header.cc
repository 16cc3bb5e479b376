#include "common/npy_header.h"

#include <unistd.h>

#include <cctype>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/data_probe.h"

namespace trainctl {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr int64_t kMaxHeaderBytes = 1 << 16;

// A cursor over the header's Python dict literal, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 784), }
class Literal {
 public:
  explicit Literal(std::string text) : text_(std::move(text)) {}
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Take(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  bool String(std::string* out) {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string::npos) return false;
    *out = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return true;
  }
  bool Word(std::string* out) {
    SkipSpace();
    const size_t start = pos_;
    while (pos_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    *out = text_.substr(start, pos_ - start);
    return !out->empty();
  }
  bool Integer(int64_t* out) {
    SkipSpace();
    const size_t start = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      if (__builtin_mul_overflow(value, 10, &value) ||
          __builtin_add_overflow(value, text_[pos_] - '0', &value)) {
        return false;
      }
      ++pos_;
    }
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2's long
    *out = value;
    return pos_ > start;
  }

 private:
  std::string text_;
  size_t pos_ = 0;
};

}  // namespace

int64_t NpyHeader::row_elements() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

std::string NpyHeader::DtypeName() const {
  if (kind == 'b') return "bool";
  return absl::StrCat(kind == 'f' ? "float" : kind == 'i' ? "int" : "uint",
                      item_bytes * 8);
}

absl::StatusOr<NpyHeader> ReadNpyHeader(int fd, int64_t file_size,
                                        const std::string& field,
                                        const std::string& path) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", path, ": ", why));
  };
  std::string preamble;
  if (!ReadFullyAt(fd, 0, 10, &preamble) || preamble.compare(0, 6, kMagic, 6) != 0) {
    return bad("not a .npy file (no NumPy magic string at its start)");
  }
  const int major = static_cast<unsigned char>(preamble[6]);
  int64_t header_bytes = 0;
  int64_t text_offset = 10;
  const auto* p = reinterpret_cast<const unsigned char*>(preamble.data());
  if (major == 1) {
    header_bytes = p[8] | (p[9] << 8);
  } else if (major == 2 || major == 3) {
    std::string wide;
    if (!ReadFullyAt(fd, 8, 4, &wide)) return bad("ends inside its header");
    const auto* w = reinterpret_cast<const unsigned char*>(wide.data());
    header_bytes = int64_t{w[0]} | int64_t{w[1]} << 8 | int64_t{w[2]} << 16 |
                   int64_t{w[3]} << 24;
    text_offset = 12;
  } else {
    return bad(absl::StrCat(".npy format version ", major,
                            " is not supported (1, 2 and 3 are)"));
  }
  if (header_bytes > kMaxHeaderBytes) return bad("its header is over 64 KiB");
  std::string text;
  if (!ReadFullyAt(fd, text_offset, static_cast<size_t>(header_bytes), &text)) {
    return bad("ends inside its header");
  }

  NpyHeader header;
  header.data_offset = text_offset + header_bytes;
  std::string descr;
  bool fortran_order = false, have_descr = false, have_order = false,
       have_shape = false;
  Literal lit(std::move(text));
  if (!lit.Take('{')) return bad("its header is not a dictionary");
  while (!lit.Take('}')) {
    std::string key;
    if (!lit.String(&key) || !lit.Take(':')) return bad("its header is malformed");
    if (key == "descr") {
      if (lit.Peek('[')) {
        return bad("structured arrays are not supported (one plain dtype is)");
      }
      if (!lit.String(&descr)) return bad("its header's descr is malformed");
      have_descr = true;
    } else if (key == "fortran_order") {
      std::string word;
      if (!lit.Word(&word) || (word != "True" && word != "False")) {
        return bad("its header's fortran_order is malformed");
      }
      fortran_order = word == "True";
      have_order = true;
    } else if (key == "shape") {
      if (!lit.Take('(')) return bad("its header's shape is malformed");
      while (!lit.Take(')')) {
        int64_t dim = 0;
        if (!lit.Integer(&dim)) return bad("its header's shape is malformed");
        header.shape.push_back(dim);
        lit.Take(',');
      }
      have_shape = true;
    } else {
      return bad("its header has a key other than descr, fortran_order and shape");
    }
    lit.Take(',');
  }
  if (!have_descr || !have_order || !have_shape) {
    return bad("its header lacks descr, fortran_order or shape");
  }
  if (fortran_order) {
    return bad("Fortran-order arrays are not supported; save "
               "np.ascontiguousarray(a)");
  }
  static const struct {
    const char* descr;
    char kind;
    int bytes;
  } kTypes[] = {{"<f4", 'f', 4}, {"<f8", 'f', 8}, {"|i1", 'i', 1},
                {"<i2", 'i', 2}, {"<i4", 'i', 4}, {"<i8", 'i', 8},
                {"|u1", 'u', 1}, {"<u2", 'u', 2}, {"<u4", 'u', 4},
                {"<u8", 'u', 8}, {"|b1", 'b', 1}};
  for (const auto& type : kTypes) {
    if (descr == type.descr) {
      header.kind = type.kind;
      header.item_bytes = type.bytes;
    }
  }
  if (header.kind == 0) {
    return bad("its dtype is not supported (float32, float64, int8 to int64, "
               "uint8 to uint64 and bool, little-endian, are)");
  }
  int64_t elements = 1;
  for (int64_t dim : header.shape) {
    if (__builtin_mul_overflow(elements, dim, &elements)) {
      return bad("its shape is too large");
    }
  }
  int64_t data_bytes = 0;
  if (__builtin_mul_overflow(elements, int64_t{header.item_bytes}, &data_bytes)) {
    return bad("its shape is too large");
  }
  if (file_size - header.data_offset != data_bytes) {
    return bad(absl::StrCat("holds ", file_size - header.data_offset,
                            " bytes of elements but its header announces ",
                            data_bytes, " (a file cut short, or still being "
                            "written?)"));
  }
  return header;
}

}  // namespace trainctl
