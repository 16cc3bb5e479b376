#include "common/data_shape_probe.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/audio_manifest.h"
#include "common/class_labels.h"
#include "common/csv_text_rows.h"
#include "common/data_shards.h"
#include "common/npy_header.h"
#include "common/tokenizer_client.h"

namespace trainctl {
namespace {

// gzip or raw, through zlib: a reader of the file's decoded bytes.
class DecodedReader {
 public:
  explicit DecodedReader(int fd) {
    const int copy = ::dup(fd);
    file_ = copy < 0 ? nullptr : gzdopen(copy, "rb");
    if (file_ == nullptr && copy >= 0) ::close(copy);
  }
  ~DecodedReader() {
    if (file_ != nullptr) gzclose(file_);
  }
  DecodedReader(const DecodedReader&) = delete;
  DecodedReader& operator=(const DecodedReader&) = delete;
  // Bytes read into buf (0 at the end, -1 on an error).
  int Read(unsigned char* buf, unsigned size) {
    return file_ == nullptr ? -1 : gzread(file_, buf, size);
  }

 private:
  gzFile file_ = nullptr;
};

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

void ProbeIdx(const v1::DataSpec& data, const DataProbeLimits& limits, PlanData* out) {
  absl::StatusOr<int> images = OpenRegularFile("data.train_images", data.train_images());
  if (images.ok()) {
    DecodedReader reader(*images);
    unsigned char header[16];
    if (reader.Read(header, sizeof(header)) == static_cast<int>(sizeof(header)) &&
        BigEndian32(header) == 0x00000803) {
      out->input_shape = {BigEndian32(header + 8), BigEndian32(header + 12)};
    }
    ::close(*images);
  }
  absl::StatusOr<int> labels = OpenRegularFile("data.train_labels", data.train_labels());
  if (!labels.ok()) return;
  DecodedReader reader(*labels);
  unsigned char header[8];
  if (reader.Read(header, sizeof(header)) == static_cast<int>(sizeof(header)) &&
      BigEndian32(header) == 0x00000801) {
    int64_t left = std::min<int64_t>(BigEndian32(header + 4), limits.max_bytes_read);
    if (data.train_limit() > 0) left = std::min(left, data.train_limit());
    std::vector<unsigned char> chunk(1 << 16);
    int largest = -1;
    while (left > 0) {
      const int n = reader.Read(chunk.data(),
                                static_cast<unsigned>(std::min<int64_t>(left, chunk.size())));
      if (n <= 0) break;
      largest = std::max<int>(largest, *std::max_element(chunk.begin(), chunk.begin() + n));
      left -= n;
    }
    if (left == 0 && largest >= 0) out->num_classes = largest + 1;
  }
  ::close(*labels);
}

void ProbeNpy(const std::string& path, PlanData* out) {
  struct stat st;
  absl::StatusOr<int> fd = OpenRegularFile("data.train_path", path, &st);
  if (!fd.ok()) return;
  absl::StatusOr<NpyHeader> header = ReadNpyHeader(*fd, st.st_size, "data.train_path", path);
  ::close(*fd);
  if (header.ok() && header->shape.size() >= 2) {
    out->input_shape.assign(header->shape.begin() + 1, header->shape.end());
  }
}

void ProbeCsv(const v1::DataSpec& data, const std::string& path, PlanData* out) {
  absl::StatusOr<int> fd = OpenRegularFile("data.train_path", path);
  if (!fd.ok()) return;
  std::string first;
  // The first line, within 1 MiB.
  char buf[4096];
  while (first.size() < (1 << 20) && first.find('\n') == std::string::npos) {
    const ssize_t n = ::read(*fd, buf, sizeof(buf));
    if (n <= 0) break;
    first.append(buf, static_cast<size_t>(n));
  }
  ::close(*fd);
  first = first.substr(0, first.find('\n'));
  if (first.empty()) return;
  const char delimiter = data.delimiter().empty() ? ',' : data.delimiter()[0];
  const int64_t columns =
      static_cast<int64_t>(std::vector<std::string>(absl::StrSplit(first, delimiter)).size());
  if (columns >= 2) out->input_shape = {columns - 1};
}

// The text of every file, in order, when all are readable and within the
// read limit together; nullopt otherwise (the ranks will tell).
std::optional<std::vector<std::string>> ReadAllWithinLimit(const std::vector<std::string>& files,
                                                           const DataProbeLimits& limits) {
  std::vector<std::string> texts;
  int64_t bytes = 0;
  for (const std::string& file : files) {
    struct stat st;
    absl::StatusOr<int> fd = OpenRegularFile("data.train_path", file, &st);
    if (!fd.ok()) return std::nullopt;
    bytes += st.st_size;
    const bool read = bytes <= limits.max_bytes_read &&
                      ReadFullyAt(*fd, 0, static_cast<size_t>(st.st_size), &texts.emplace_back());
    ::close(*fd);
    if (!read) return std::nullopt;
  }
  return texts;
}

// The classes the ranks count for a training set's labels (ClassNamesOf):
// its names, or its largest id + 1; 0 when the labels are no classes.
int64_t NumClassesOf(const std::vector<std::string>& labels) {
  absl::StatusOr<std::vector<std::string>> names = ClassNamesOf(labels, "data.train_path");
  if (!names.ok()) return 0;
  if (!names->empty()) return static_cast<int64_t>(names->size());
  absl::StatusOr<std::vector<int64_t>> ids = ClassIdsOf(labels, {}, {}, "data.train_path", "");
  return ids.ok() && !ids->empty() ? *std::max_element(ids->begin(), ids->end()) + 1 : 0;
}

// csv with text_column: the classes of every training file's labels, when
// all are within the read limit; the sample shape and byte vocabulary are
// the spec's (ResolvePlanData).
void ProbeCsvTextClasses(const v1::DataSpec& data, const std::vector<std::string>& files,
                         const DataProbeLimits& limits, PlanData* out) {
  const std::optional<std::vector<std::string>> texts = ReadAllWithinLimit(files, limits);
  if (!texts) return;
  std::vector<std::string> labels;
  for (size_t i = 0; i < files.size(); ++i) {
    absl::StatusOr<CsvTextRows> rows =
        ParseCsvTextRows((*texts)[i], data, "data.train_path", files[i]);
    if (!rows.ok()) return;
    labels.insert(labels.end(), rows->labels.begin(), rows->labels.end());
  }
  out->num_classes = NumClassesOf(labels);
}

// audio: the classes of every training manifest, when all are within the
// read limit; the spectrogram's shape is the spec's (ResolvePlanData).
void ProbeAudio(const v1::DataSpec& data, const std::vector<std::string>& manifests,
                const DataProbeLimits& limits, PlanData* out) {
  const std::optional<std::vector<std::string>> texts = ReadAllWithinLimit(manifests, limits);
  if (!texts) return;
  std::vector<std::string> labels;
  for (size_t i = 0; i < manifests.size(); ++i) {
    absl::StatusOr<std::vector<AudioManifestRow>> rows =
        ParseAudioManifest((*texts)[i], data.audio(), "data.train_path", manifests[i]);
    if (!rows.ok()) return;
    for (const AudioManifestRow& row : *rows) labels.push_back(row.label);
  }
  out->num_classes = NumClassesOf(labels);
}

}  // namespace

PlanData ProbeSampleShape(const v1::DataSpec& data, const DataProbeLimits& limits) {
  PlanData out;
  if (!data.tokenizer().empty()) {
    // The vocabulary is the tokenizer's; the sample shape is the spec's.
    absl::StatusOr<TokenizerInfo> info =
        ReadTokenizerInfo(data.tokenizer(), "data.tokenizer", limits.deadline);
    if (info.ok()) out.vocab_size = info->pieces;
  }
  if (data.format() == "csv" && !data.text_column().empty()) {
    absl::StatusOr<std::vector<std::string>> files =
        ResolveShards("data.train_path", data.train_path());
    if (files.ok()) ProbeCsvTextClasses(data, *files, limits, &out);
    return out;
  }
  if (data.format() == "text") return out;
  if (data.format() == "idx") {
    ProbeIdx(data, limits, &out);
    return out;
  }
  if (data.format() != "npy" && data.format() != "csv" && data.format() != "audio") {
    return out;
  }
  absl::StatusOr<std::vector<std::string>> shards =
      ResolveShards("data.train_path", data.train_path());
  if (!shards.ok() || shards->empty()) return out;
  if (data.format() == "audio") {
    ProbeAudio(data, *shards, limits, &out);
  } else if (data.format() == "npy") {
    ProbeNpy(shards->front(), &out);
  } else {
    ProbeCsv(data, shards->front(), &out);
  }
  return out;
}

}  // namespace trainctl
