// data.audio (common/spec_audio.h): its defaults, its rules, and that it
// belongs to data.format audio alone.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/spec.h"
#include "common/spec_audio.h"

namespace trainctl {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<v1::JobSpec> Parse(const std::string& audio, const std::string& task = "") {
  return ParseJobSpec("model: audio_cnn\n" + task +
                      "data: {format: audio, train_path: /d/train.csv" + audio + "}\n");
}

TEST(SpecAudioTest, DefaultsAreASpeechFrontEnd) {
  absl::StatusOr<v1::JobSpec> spec = Parse("");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::AudioSpec& a = spec->data().audio();
  EXPECT_EQ(a.sample_rate(), 16000);
  EXPECT_EQ(a.clip_seconds(), 1.0);
  EXPECT_EQ(a.n_fft(), 400);       // 25 ms
  EXPECT_EQ(a.hop_length(), 160);  // 10 ms
  EXPECT_EQ(a.n_mels(), 40);
  EXPECT_EQ(a.f_min(), 0);
  EXPECT_EQ(a.f_max(), 8000);
  EXPECT_EQ(a.path_column(), "path");
  EXPECT_EQ(a.label_column(), "label");
  EXPECT_EQ(AudioClipSamples(a), 16000);
  EXPECT_EQ(AudioFrames(a), 101);

  // The windows follow the rate; a spec's JSON parses back to itself.
  spec = Parse(", audio: {sample_rate: 8000, clip_seconds: 0.5, n_mels: 20}");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->data().audio().n_fft(), 200);
  EXPECT_EQ(spec->data().audio().hop_length(), 80);
  EXPECT_EQ(spec->data().audio().f_max(), 4000);
  EXPECT_EQ(AudioFrames(spec->data().audio()), 51);
  absl::StatusOr<v1::JobSpec> again = ParseJobSpec(JobSpecToJson(*spec));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), spec->SerializeAsString());
}

TEST(SpecAudioTest, ItsRulesNameTheField) {
  struct Case {
    std::string audio, task, error;
  };
  for (const Case& c : std::vector<Case>{
           {", audio: {f_min: 300, f_max: 200}", "",
            "data.audio.f_max: 200 Hz is not above f_min 300 Hz"},
           {", audio: {f_max: 9000}", "", "data.audio.f_max: must be in [0, 8000]"},
           {", audio: {clip_seconds: 0.01}", "",
            "data.audio.clip_seconds: a clip of 160 samples is too short for n_fft 400"},
           {", audio: {n_fft: 64, n_mels: 40}", "",
            "data.audio.n_mels: 40 mel filters over the 33 frequency bins of n_fft 64"},
           {", audio: {clip_seconds: 600, hop_length: 1, n_fft: 16, n_mels: 8}", "",
            "data.audio.clip_seconds: spectrograms of 8 x 9600001 values exceed"},
           {", audio: {path_column: file, label_column: file}", "",
            "data.audio.label_column: must differ from path_column"},
           {", audio: {sample_rate: 16000, hop: 10}", "", "data.audio.hop: unknown field"},
           {"", "task: regression\n", "task: data.format audio holds labelled sounds"},
       }) {
    absl::StatusOr<v1::JobSpec> spec = Parse(c.audio, c.task);
    ASSERT_FALSE(spec.ok()) << c.audio;
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(c.error)) << c.audio;
  }
  absl::StatusOr<v1::JobSpec> csv =
      ParseJobSpec("data: {format: csv, train_path: /d/a.csv, audio: {n_mels: 40}}\n");
  ASSERT_FALSE(csv.ok());
  EXPECT_THAT(std::string(csv.status().message()),
              HasSubstr("data.audio: is for data.format audio (data.format is csv)"));
}

}  // namespace
}  // namespace trainctl
