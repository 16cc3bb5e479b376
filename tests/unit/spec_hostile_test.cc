// Hostile job specs (issue #7): each must be refused quickly with an
// INVALID_ARGUMENT that names what is wrong, never crash, hang or blow up.
// The same inputs seed the fuzzer (tests/fuzz/corpus), and every corpus file
// is run through the parser here too, so the default g++ build and the
// sanitizer build (label `sanitize`) replay them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "common/spec.h"
#include "common/spec_reader.h"

namespace trainctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A spec that is valid on its own; cases add one bad part to it.
constexpr char kValid[] =
    "model: mlp\ndata: {train_images: /d/a, train_labels: /d/b}\n";

// Generous for a loaded 2-core machine under ASan; the unguarded parser
// took minutes (or forever) on the exponential and deep cases.
constexpr double kQuickSeconds = 3.0;

std::string Repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// Nine levels of nine aliases each: 9^9 (387 million) leaves once expanded.
std::string BillionLaughs() {
  std::string s = "a0: &a0 [lol]\n";
  for (int i = 1; i <= 9; ++i) {
    s += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 9; ++k) {
      s += (k ? ", *a" : "*a") + std::to_string(i - 1);
    }
    s += "]\n";
  }
  return s + kValid;
}

// `a:` nested `depth` levels in block style.
std::string DeepBlock(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += std::string(2 * i, ' ') + "a:\n";
  return s + std::string(2 * depth, ' ') + "1\n";
}

struct Hostile {
  const char* name;
  std::function<std::string()> spec;
  const char* expected;  // a substring of the error
};

std::ostream& operator<<(std::ostream& os, const Hostile& h) {
  return os << h.name;
}

class SpecHostileTest : public ::testing::TestWithParam<Hostile> {};

TEST_P(SpecHostileTest, RefusedQuicklyNamingTheProblem) {
  const std::string spec = GetParam().spec();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<v1::JobSpec> parsed = ParseJobSpec(spec);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_FALSE(parsed.ok()) << "accepted: " << JobSpecToJson(*parsed);
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(parsed.status().message());
  EXPECT_THAT(message, HasSubstr(GetParam().expected));
  EXPECT_LT(seconds, kQuickSeconds);
  // The error echoes some input; it must stay readable whatever the input.
  EXPECT_LT(message.size(), 16u * 1024) << message.substr(0, 500);
}

INSTANTIATE_TEST_SUITE_P(
    All, SpecHostileTest,
    ::testing::Values(
        Hostile{"HugeInteger",
                [] {
                  return std::string("ranks: 99999999999999999999999\n") +
                         kValid;
                },
                "ranks: must be in [1, 4096], got 99999999999999999999999"},
        Hostile{"HugeNegativeInteger",
                [] {
                  return std::string("seed: -99999999999999999999999\n") +
                         kValid;
                },
                "seed: must be in [0, 9223372036854775807], got -999"},
        Hostile{"HugeFloat",
                [] { return std::string(kValid) + "optimizer: {lr: 1e999}"; },
                "optimizer.lr: must be a finite number, got '1e999'"},
        Hostile{"NaN",
                [] { return std::string(kValid) + "optimizer: {lr: .nan}"; },
                "optimizer.lr: must be a finite number, got '.nan'"},
        Hostile{"Infinity",
                [] {
                  return std::string(kValid) +
                         "training: {max_grad_norm: .inf}";
                },
                "training.max_grad_norm: must be a finite number"},
        Hostile{"NaNInAList",
                [] {
                  return std::string(kValid) +
                         "optimizer: {betas: [.nan, 0.9]}";
                },
                "optimizer.betas: must be two numbers in [0, 1)"},
        Hostile{
            "NegativeBatch",
            [] { return std::string(kValid) + "training: {batch_size: -64}"; },
            "training.batch_size: must be in [1, 16777216], got -64"},
        Hostile{"NegativeWidth",
                [] {
                  return std::string(
                      "model: {type: mlp, hidden: [-1]}\n"
                      "data: {train_images: a, "
                      "train_labels: b}");
                },
                "model.hidden[0]: must be an integer in [1, 65536]"},
        Hostile{
            "NegativeLimit",
            [] {
              return std::string(
                  "model: mlp\ndata: {train_images: a, "
                  "train_labels: b, train_limit: -5}");
            },
            "data.train_limit: must be in [0, 9223372036854775807], got -5"},
        Hostile{"DeepFlowNesting",
                [] {
                  return std::string(kValid) +
                         "model: " + Repeat("[", 100'000) +
                         Repeat("]", 100'000);
                },
                "model[0][0][0]"},
        Hostile{"DeepFlowNestingSaysLimit",
                [] {
                  return "x: " + Repeat("{a: ", 50'000) + "1" +
                         Repeat("}", 50'000);
                },
                "nested deeper than 32 levels (line 1)"},
        Hostile{"DeepBlockNesting", [] { return DeepBlock(40); },
                // The top mapping and 31 `a:` below it make 32 levels.
                "a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a."
                "a.a: nested deeper than 32 levels (line 33)"},
        Hostile{"Latin1Name",
                [] { return std::string("name: caf\xe9\n") + kValid; },
                "name: is not valid UTF-8 (byte 0xe9 at offset 3 of the "
                "string) at line 1; save the spec as UTF-8"},
        Hostile{"TruncatedUtf8InPath",
                [] {
                  return std::string(
                      "model: mlp\ndata: {train_images: "
                      "\"/d/\xe6\x97\", train_labels: b}");
                },
                "data.train_images: is not valid UTF-8 (byte 0xe6"},
        Hostile{"OverlongUtf8",
                [] { return std::string("name: \"a\xc0\xaf\"\n") + kValid; },
                "name: is not valid UTF-8 (byte 0xc0 at offset 1"},
        Hostile{"Utf16Surrogate",
                [] { return std::string("name: \"\xed\xa0\x80\"\n") + kValid; },
                "name: is not valid UTF-8 (byte 0xed"},
        Hostile{"NonUtf8Key",
                [] { return std::string("model: {typ\xff: mlp}\n") + kValid; },
                "model: a key is not valid UTF-8 (byte 0xff at offset 3"},
        Hostile{"BillionLaughs", BillionLaughs,
                "spec: has more than 100000 values, counting each alias as "
                "the values it repeats (at line 6)"},
        Hostile{"AliasOfItself",
                [] { return std::string("model: &m {type: mlp, x: *m}\n"); },
                "model.x: alias at line 1 refers to a node that contains it"},
        Hostile{"DuplicateTopKey",
                [] { return std::string("ranks: 1\nranks: 2\n") + kValid; },
                "ranks: is given twice (lines 1 and 2); keep one"},
        Hostile{"DuplicateNestedKey",
                [] {
                  return std::string(kValid) +
                         "training: {batch_size: 8, batch_size: 16}";
                },
                "training.batch_size: is given twice (lines 3 and 3)"},
        Hostile{"DuplicateKeyViaAlias",
                [] {
                  return std::string("name: &n ranks\nranks: 2\n*n : 3\n") +
                         kValid;
                },
                "ranks: is given twice (lines 2 and 3)"},
        Hostile{"EmptyKey",
                [] { return std::string("model: {\"\": mlp}\n") + kValid; },
                "model: has an empty key at line 1; every key must be a "
                "field name"},
        Hostile{"NullKey", [] { return std::string("~: 1\n") + kValid; },
                "spec: has an empty or null key at line 1"},
        Hostile{"ListAsKey",
                [] { return std::string("training: {[a, b]: 1}\n") + kValid; },
                "training: has a list or mapping as a key at line 1"},
        Hostile{"TwoDocuments",
                [] { return std::string(kValid) + "---\n" + kValid; },
                "spec: holds more than one YAML document (a second begins "
                "at line 3)"},
        Hostile{"OverTheSizeLimit",
                [] {
                  return std::string(kValid) + "# " + Repeat("x", 256 << 10) +
                         "\n";
                },
                "bytes is over the limit of 262144"},
        Hostile{"LongStringValue",
                [] {
                  return std::string(kValid) + "tensorboard: {dir: /" +
                         Repeat("x", 5000) + "}\n";
                },
                "tensorboard.dir: is 5001 bytes; at most 4096 are allowed"},
        Hostile{"ManyNodesUnderTheSizeLimit",
                [] {
                  return std::string(kValid) + "seed: [" +
                         Repeat("1,", 110'000) + "1]";
                },
                "spec: has more than 100000 values"},
        Hostile{"ManyUnknownKeys",
                [] {
                  std::string s = kValid;
                  for (int i = 0; i < 20'000; ++i) {
                    s += "k" + std::to_string(i) + ": 1\n";
                  }
                  return s;
                },
                "more problems"},
        Hostile{
            "ManyDuplicateKeys",
            [] { return std::string(kValid) + Repeat("ranks: 1\n", 20'000); },
            "spec: 19951 more problems like these not shown"},
        Hostile{"HugeUnknownValue",
                [] {
                  return "model: " + Repeat("x", 200'000) + "\n" +
                         "data: {train_images: a, train_labels: b}";
                },
                "model.type: unknown model 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                "xxxxxxxx...' (known:"},
        Hostile{"HugeUnknownKey",
                // Explicit (`? `): YAML caps implicit keys at 1024 chars.
                [] {
                  return std::string(kValid) + "? " + Repeat("k", 200'000) +
                         "\n: 1\n";
                },
                "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...: unknown field"}),
    [](const ::testing::TestParamInfo<Hostile>& info) {
      return std::string(info.param.name);
    });

TEST(SpecHostileTest, AliasesThatStaySmallAreFine) {
  // Anchors and aliases are YAML; only their expansion is bounded.
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(
      "model: {type: mlp, hidden: &w [64, 64]}\n"
      "data: {train_images: &p /d/x, train_labels: *p}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->data().train_labels(), "/d/x");
}

TEST(SpecHostileTest, Utf8TextIsAccepted) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(
      std::string("name: \"caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x9a\x80\"\n") +
      kValid);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x9a\x80");
}

TEST(SpecHostileTest, NestingAtTheLimitIsOnlyAnUnknownField) {
  // 31 levels under the top mapping: deep but allowed, so the ordinary
  // field check speaks.
  absl::StatusOr<v1::JobSpec> spec =
      ParseJobSpec(std::string(kValid) + DeepBlock(31));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()),
              HasSubstr("a: unknown field"));
  EXPECT_THAT(std::string(spec.status().message()),
              Not(HasSubstr("nested deeper")));
}

TEST(SpecHostileTest, AbbreviatedCutsBetweenCharacters) {
  // "a" then 2-byte characters: byte 40 is the middle of one.
  std::string s = "a";
  for (int i = 0; i < 30; ++i) s += "\xc3\xa9";
  const std::string cut = Abbreviated(s);
  EXPECT_EQ(cut, s.substr(0, 39) + "...");
  size_t bad = 0;
  EXPECT_TRUE(IsValidUtf8(cut, &bad)) << bad;
  EXPECT_EQ(Abbreviated("short"), "short");
}

TEST(SpecHostileTest, Utf8Validation) {
  size_t bad = 99;
  EXPECT_TRUE(IsValidUtf8("plain \xe6\x97\xa5 \xf4\x8f\xbf\xbf", &bad));
  EXPECT_FALSE(IsValidUtf8("ab\xf4\x90\x80\x80", &bad));  // past U+10FFFF
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf", &bad));  // overlong '/'
  EXPECT_EQ(bad, 0u);
  EXPECT_FALSE(IsValidUtf8("x\xe6\x97", &bad));  // cut short
  EXPECT_EQ(bad, 1u);
  EXPECT_FALSE(IsValidUtf8("x\xe6(\xa5", &bad));  // bad continuation
  EXPECT_EQ(bad, 2u);
}

// Every file of the fuzzer's seed corpus: valid_* files parse, the others
// are refused with INVALID_ARGUMENT; none takes long.
TEST(SpecHostileTest, FuzzCorpusReplays) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(TRAINCTL_SOURCE_DIR) / "tests/fuzz/corpus";
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(text.str());
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    const std::string name = entry.path().filename().string();
    if (name.rfind("valid_", 0) == 0) {
      EXPECT_TRUE(spec.ok()) << name << ": " << spec.status();
    } else {
      EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument)
          << name;
    }
    EXPECT_LT(seconds, kQuickSeconds) << name;
    ++files;
  }
  EXPECT_GE(files, 10) << "the corpus at " << dir << " is missing";
}

}  // namespace
}  // namespace trainctl
