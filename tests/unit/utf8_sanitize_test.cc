// SanitizeUtf8: what rank output becomes before it goes into proto3 string
// fields (the coordinator rejects a message with invalid UTF-8 in one).

#include "common/utf8_sanitize.h"

#include <gtest/gtest.h>

#include <string>

#include "trainctl/v1/workers.pb.h"

namespace trainctl::agent {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(SanitizeUtf8Test, ValidTextIsUnchanged) {
  const std::string text = "loss 0.25 \xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80";
  EXPECT_TRUE(IsValidUtf8(text));
  EXPECT_EQ(SanitizeUtf8(text), text);
  EXPECT_EQ(SanitizeUtf8(""), "");
}

TEST(SanitizeUtf8Test, InvalidBytesBecomeReplacementCharacters) {
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_EQ(SanitizeUtf8("\xff"), kFffd);
  EXPECT_EQ(SanitizeUtf8("a\xfe" "b"), "a" + kFffd + "b");
  // A stray continuation byte.
  EXPECT_EQ(SanitizeUtf8("\x80x"), kFffd + "x");
  // F5..FF never start a sequence.
  EXPECT_EQ(SanitizeUtf8("\xF5\x80\x80\x80"), kFffd + kFffd + kFffd + kFffd);
}

TEST(SanitizeUtf8Test, TruncatedSequenceIsReplacedAndWhatFollowsKept) {
  // The first two bytes of a 3-byte euro sign, then ASCII.
  const std::string out = SanitizeUtf8("\xE2\x82z");
  EXPECT_TRUE(IsValidUtf8(out));
  EXPECT_NE(out.find(kFffd), std::string::npos);
  EXPECT_EQ(out.back(), 'z');
  // A lead byte at the very end.
  EXPECT_EQ(SanitizeUtf8("ok\xC3"), "ok" + kFffd);
}

TEST(SanitizeUtf8Test, OverlongEncodingsAreRejected) {
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // '/' in two bytes
  EXPECT_FALSE(IsValidUtf8("\xC1\xBF"));
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // '/' in three bytes
  EXPECT_FALSE(IsValidUtf8("\xF0\x80\x80\xAF"));  // '/' in four bytes
  for (const char* overlong : {"\xC0\xAF", "\xE0\x80\xAF", "\xF0\x80\x80\xAF"}) {
    const std::string out = SanitizeUtf8(overlong);
    EXPECT_TRUE(IsValidUtf8(out));
    EXPECT_EQ(out.find('/'), std::string::npos) << "decoded as '/'";
  }
}

TEST(SanitizeUtf8Test, SurrogatesAndCodePointsAboveTheMaximumAreRejected) {
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // U+D800
  EXPECT_FALSE(IsValidUtf8("\xED\xBF\xBF"));      // U+DFFF
  EXPECT_TRUE(IsValidUtf8("\xED\x9F\xBF"));       // U+D7FF
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // U+110000
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));   // U+10FFFF
  EXPECT_TRUE(IsValidUtf8(SanitizeUtf8("\xED\xA0\x80")));
  EXPECT_TRUE(IsValidUtf8(SanitizeUtf8("\xF4\x90\x80\x80")));
}

TEST(SanitizeUtf8Test, CutsOnCodePointBoundaries) {
  const std::string e_acute = "\xC3\xA9";
  // 3 bytes allowed: "a" and one 2-byte character; the next does not fit.
  EXPECT_EQ(SanitizeUtf8("a" + e_acute + e_acute, 3), "a" + e_acute);
  EXPECT_EQ(SanitizeUtf8("a" + e_acute + e_acute, 4), "a" + e_acute);
  EXPECT_EQ(SanitizeUtf8("a" + e_acute + e_acute, 5), "a" + e_acute + e_acute);
  // A replacement character (3 bytes) is not cut either.
  EXPECT_EQ(SanitizeUtf8("ab\xff", 4), "ab");
  // The 16 KiB cut of a long line of 2-byte characters behind one byte of
  // padding falls inside a character: the result stays valid.
  std::string line = "x";
  for (int i = 0; i < 9000; ++i) line += e_acute;
  const std::string cut = SanitizeUtf8(line, 16384);
  EXPECT_LE(cut.size(), 16384u);
  EXPECT_EQ(cut.size(), 16383u);
  EXPECT_TRUE(IsValidUtf8(cut));
}

TEST(SanitizeUtf8Test, SanitizedTextSurvivesAProtoRoundTrip) {
  v1::AgentMessage message;
  message.mutable_rank_status()->set_message(
      SanitizeUtf8("error: \xff\xfe in /data/\xC3"));
  std::string wire;
  ASSERT_TRUE(message.SerializeToString(&wire));
  v1::AgentMessage parsed;
  EXPECT_TRUE(parsed.ParseFromString(wire));
  EXPECT_EQ(parsed.rank_status().message(), message.rank_status().message());
}


TEST(ControlCharactersTest, AreFoundAndEscapedToPrintAsWhatTheyAre) {
  EXPECT_FALSE(HasControlCharacters("plain text\twith a tab, caf\xc3\xa9"));
  EXPECT_TRUE(HasControlCharacters("a\nb"));
  EXPECT_TRUE(HasControlCharacters("\x1b]0;pwned\x07"));
  EXPECT_TRUE(HasControlCharacters("\x7f"));
  EXPECT_TRUE(HasControlCharacters("\xc2\x9b"));  // C1 CSI
  EXPECT_EQ(EscapeControlCharacters("\x1b]0;pwned\x07\nI 12:00 forged"),
            "\\x1b]0;pwned\\x07\\x0aI 12:00 forged");
  EXPECT_EQ(EscapeControlCharacters("x\xc2\x9b" "2J"), "x\\u009b2J");
  EXPECT_EQ(EscapeControlCharacters("caf\xc3\xa9\t!"), "caf\xc3\xa9\t!");
}

}  // namespace
}  // namespace trainctl::agent
