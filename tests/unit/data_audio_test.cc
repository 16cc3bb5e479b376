// format audio: resampling, mel filters and log-mel spectrograms
// (audio_features.h) checked against tones whose answer is known, and
// LoadDatasets over a manifest of sound files written here with libsndfile.

#include <sndfile.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/spec.h"
#include "tests/unit/data_test_util.h"
#include "worker/train/data/audio_features.h"

namespace trainctl::train::data_testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

torch::Tensor Tone(double hz, int64_t rate, double seconds, double amplitude = 0.5) {
  const torch::Tensor t =
      torch::arange(static_cast<int64_t>(std::llround(rate * seconds)), torch::kFloat64) / static_cast<double>(rate);
  return (amplitude * torch::sin(2 * M_PI * hz * t)).to(torch::kFloat32);
}

double Rms(const torch::Tensor& x) { return x.pow(2).mean().sqrt().item<double>(); }

v1::AudioSpec Audio(const std::string& yaml = "") {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(
      "model: audio_cnn\ndata: {format: audio, train_path: /a.csv, audio: {" + yaml + "}}\n");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec->data().audio();
}

TEST(ResampleTest, AToneKeepsItsShapeAcrossRates) {
  for (const auto& [from, to] : std::vector<std::pair<int64_t, int64_t>>{
           {22050, 16000}, {8000, 16000}, {48000, 16000}, {44100, 22050}}) {
    SCOPED_TRACE(std::to_string(from) + " -> " + std::to_string(to));
    const torch::Tensor out = Resample(Tone(440, from, 1.0), from, to);
    ASSERT_EQ(out.size(0), to);
    // Away from the edges, where the filter reads zeros past the clip.
    const torch::Tensor inner = out.slice(0, 200, to - 200);
    const torch::Tensor want = Tone(440, to, 1.0).slice(0, 200, to - 200);
    EXPECT_LT((inner - want).abs().max().item<double>(), 5e-3);
  }
  EXPECT_EQ(Resample(Tone(440, 22050, 0.5), 22050, 16000).size(0), 8000);
  const torch::Tensor same = Tone(440, 16000, 0.1);
  EXPECT_TRUE(torch::equal(Resample(same, 16000, 16000), same));
}

TEST(ResampleTest, WhatTheLowerRateCannotHoldIsFilteredOut) {
  // 10 kHz is past 16 kHz's Nyquist: kept, it would alias to 6 kHz.
  const torch::Tensor out = Resample(Tone(10000, 22050, 1.0), 22050, 16000);
  EXPECT_LT(Rms(out.slice(0, 200, 15800)), 0.01 * Rms(Tone(10000, 22050, 1.0)));
}

TEST(MelFilterbankTest, TrianglesRiseAlongTheMelScale) {
  absl::StatusOr<torch::Tensor> filters = MelFilterbank(Audio());
  ASSERT_TRUE(filters.ok()) << filters.status();
  ASSERT_EQ(filters->sizes(), (std::vector<int64_t>{201, 40}));
  const torch::Tensor peaks = std::get<0>(filters->max(0));
  EXPECT_TRUE((peaks > 0).all().item<bool>());
  EXPECT_TRUE((peaks <= 1 + 1e-6).all().item<bool>());
  const torch::Tensor at = filters->argmax(0);
  EXPECT_TRUE((at.slice(0, 1) >= at.slice(0, 0, -1)).all().item<bool>());
  EXPECT_GT(at[39].item<int64_t>(), 4 * at[10].item<int64_t>());  // wider apart up high

  absl::StatusOr<torch::Tensor> too_many = MelFilterbank(Audio("n_fft: 64, n_mels: 33"));
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(std::string(too_many.status().message()),
              HasSubstr("data.audio.n_mels: mel filter 1 of 33 covers none of the 33 "
                        "frequency bins of n_fft 64"));
}

// The mel band a tone lands in: the one whose centre is nearest it.
int64_t BandOf(double hz, const v1::AudioSpec& a) {
  auto mel = [](double f) { return 2595 * std::log10(1 + f / 700); };
  int64_t best = 0;
  double nearest = 1e9;
  for (int m = 0; m < a.n_mels(); ++m) {
    const double centre_mel = mel(a.f_min()) + (m + 1) * (mel(a.f_max()) - mel(a.f_min())) /
                                                   (a.n_mels() + 1);
    const double centre = 700 * (std::pow(10, centre_mel / 2595) - 1);
    if (std::abs(centre - hz) < nearest) nearest = std::abs(centre - hz), best = m;
  }
  return best;
}

TEST(LogMelSpectrogramTest, AToneLightsItsBandAndSilenceIsTheFloor) {
  const v1::AudioSpec a = Audio();
  absl::StatusOr<LogMelSpectrogram> log_mel = LogMelSpectrogram::Create(a);
  ASSERT_TRUE(log_mel.ok()) << log_mel.status();
  const torch::Tensor clips =
      torch::stack({Tone(1000, 16000, 1.0), Tone(3000, 16000, 1.0), torch::zeros({16000})});
  const torch::Tensor out = (*log_mel)(clips);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{3, 40, 101}));
  EXPECT_EQ(out[0].select(1, 50).argmax().item<int64_t>(), BandOf(1000, a));
  EXPECT_EQ(out[1].select(1, 50).argmax().item<int64_t>(), BandOf(3000, a));
  EXPECT_NEAR(out[2].max().item<double>(), std::log(1e-6), 1e-4);
  // Power: half the amplitude is a quarter of the power in every band.
  const torch::Tensor quieter = (*log_mel)((Tone(1000, 16000, 1.0, 0.25)).unsqueeze(0));
  const int64_t band = BandOf(1000, a);
  EXPECT_NEAR((out[0][band][50] - quieter[0][band][50]).item<double>(), std::log(4.0), 1e-3);
}

// torchaudio's resample and MelSpectrogram(mel_scale="htk") of the signal
// below, from tests/unit/testdata/make_torchaudio_reference.py.
TEST(LogMelSpectrogramTest, MatchesTorchaudio) {
  std::ifstream in(TRAINCTL_SOURCE_DIR "/tests/unit/testdata/torchaudio_log_mel.f32",
                   std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  ASSERT_EQ(bytes.size(), 40u * 101 * sizeof(float));
  const torch::Tensor want = torch::from_blob(bytes.data(), {40, 101}, torch::kFloat32);
  // The script's signal: a chirp from 100 Hz to 7 kHz, a 440 Hz tone and a
  // 9 kHz one, 1 s at 22.05 kHz.
  const torch::Tensor t = torch::arange(22050, torch::kFloat64) / 22050.0;
  const torch::Tensor signal =
      (0.4 * torch::sin(2 * M_PI * (100 * t + 0.5 * 6900 * t * t)) +
       0.3 * torch::sin(2 * M_PI * 440 * t) + 0.2 * torch::sin(2 * M_PI * 9000 * t))
          .to(torch::kFloat32);
  absl::StatusOr<LogMelSpectrogram> log_mel = LogMelSpectrogram::Create(Audio());
  ASSERT_TRUE(log_mel.ok()) << log_mel.status();
  const torch::Tensor got = (*log_mel)(Resample(signal, 22050, 16000).unsqueeze(0))[0];
  ASSERT_EQ(got.sizes(), want.sizes());
  // Where a band holds power, the logs agree to 0.1%; near the 1e-6 floor
  // (the 9 kHz tone's remains, FFT round-off) the powers agree to 1e-5.
  const torch::Tensor loud = want > -6;
  ASSERT_GT(loud.sum().item<int64_t>(), 1000);
  EXPECT_LT((got - want).abs().masked_select(loud).max().item<double>(), 2e-3);
  EXPECT_LT((got.exp() - want.exp()).abs().masked_select(~loud).max().item<double>(), 1e-5);
}

class AudioDataTest : public DataTest {
 protected:
  // A sound file of `channels` x frames (interleaved), in `format`.
  std::string WriteSound(const std::string& name, int rate, int channels,
                         const std::vector<float>& interleaved,
                         int format = SF_FORMAT_WAV | SF_FORMAT_PCM_16) {
    const std::string path = dir_ + "/" + name;
    SF_INFO info{};
    info.samplerate = rate;
    info.channels = channels;
    info.format = format;
    SNDFILE* f = sf_open(path.c_str(), SFM_WRITE, &info);
    EXPECT_NE(f, nullptr) << sf_strerror(nullptr);
    sf_writef_float(f, interleaved.data(),
                    static_cast<sf_count_t>(interleaved.size() / static_cast<size_t>(channels)));
    sf_close(f);
    return path;
  }
  static std::vector<float> Samples(const torch::Tensor& t) {
    return std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  }
  v1::JobSpec AudioSpec(const std::string& manifest) {
    v1::JobSpec spec = Spec("audio");
    *spec.mutable_data()->mutable_audio() = Audio();
    spec.mutable_data()->set_train_path(manifest);
    return spec;
  }
  std::string Error(const std::string& manifest) {
    absl::StatusOr<Datasets> ds = LoadDatasets(AudioSpec(manifest));
    EXPECT_FALSE(ds.ok());
    return std::string(ds.status().message());
  }
};

TEST_F(AudioDataTest, AManifestsFilesBecomeSpectrogramsWithTheirLabels) {
  ASSERT_EQ(::mkdir((dir_ + "/wav").c_str(), 0755), 0);
  const torch::Tensor tone = Tone(1000, 16000, 2.0);
  WriteSound("wav/mono.wav", 16000, 1, Samples(tone));
  // The same tone in the left channel only: averaged, half the amplitude.
  const torch::Tensor left_only = torch::stack({tone, torch::zeros_like(tone)}, 1);
  WriteSound("wav/stereo.flac", 16000, 2, Samples(left_only.contiguous()),
             SF_FORMAT_FLAC | SF_FORMAT_PCM_16);
  // A quarter second at 22.05 kHz: resampled, then padded with silence.
  WriteSound("wav/short.wav", 22050, 1, Samples(Tone(1000, 22050, 0.25)));
  const std::string manifest = Write(
      "train.csv", "path,label\nwav/mono.wav,2\nwav/stereo.flac,0\n\"wav/short.wav\",5\n");
  absl::StatusOr<Datasets> ds = LoadDatasets(AudioSpec(manifest));
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->train->size(), 3);
  EXPECT_EQ(ds->info.input_shape, (std::vector<int64_t>{1, 40, 101}));
  EXPECT_EQ(ds->info.num_classes, 6);
  const Batch b = ds->train->Gather({0, 1, 2});
  EXPECT_TRUE(torch::equal(b.targets, I64({2, 0, 5})));
  ASSERT_EQ(b.inputs.sizes(), (std::vector<int64_t>{3, 1, 40, 101}));
  const int64_t band = BandOf(1000, Audio());
  const torch::Tensor mono = b.inputs[0][0], stereo = b.inputs[1][0], short_clip = b.inputs[2][0];
  EXPECT_NEAR((mono[band][50] - stereo[band][50]).item<double>(), std::log(4.0), 0.01);
  EXPECT_EQ(short_clip.select(1, 10).argmax().item<int64_t>(), band);
  // Past the quarter second (and the window's reach), silence.
  EXPECT_NEAR(short_clip.slice(1, 40).max().item<double>(), std::log(1e-6), 1e-4);
}

// Labels that are not all ids are class names, numbered in byte order over
// the training set; the eval set takes the training set's numbering.
TEST_F(AudioDataTest, NamedClassesAreNumberedByTheTrainingSet) {
  WriteSound("a.wav", 16000, 1, Samples(Tone(500, 16000, 0.5)));
  v1::JobSpec spec = AudioSpec(Write("train.csv", "path,label\na.wav,yes\na.wav,no\na.wav,up\n"));
  spec.mutable_data()->set_eval_path(Write("eval.csv", "path,label\na.wav,up\na.wav,no\n"));
  absl::StatusOr<Datasets> ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->info.num_classes, 3);
  EXPECT_TRUE(torch::equal(ds->train->Gather({0, 1, 2}).targets, I64({2, 0, 1})));
  EXPECT_TRUE(torch::equal(ds->eval->Gather({0, 1}).targets, I64({1, 0})));

  spec.mutable_data()->set_eval_path(Write("eval.csv", "path,label\na.wav,up\na.wav,secret\n"));
  absl::StatusOr<Datasets> unknown = LoadDatasets(spec);
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("data.eval_path: " + dir_ +
                        "/eval.csv: line 3: the label names no class of the training set"));
  EXPECT_THAT(std::string(unknown.status().message()), Not(HasSubstr("secret")));
}

TEST_F(AudioDataTest, AFileThatIsNoSoundIsNamedByItsLine) {
  WriteSound("ok.wav", 16000, 1, Samples(Tone(500, 16000, 0.5)));
  Write("secret.txt", "password=hunter2\n");
  ASSERT_EQ(::mkfifo((dir_ + "/fifo.wav").c_str(), 0600), 0);
  struct Case {
    std::string rows, error;
  };
  for (const Case& c : std::vector<Case>{
           {"ok.wav,1\nsecret.txt,0\n", "line 3: its sound file: not a sound file libsndfile reads"},
           {"ok.wav,1\nsecret-missing.wav,0\n",
            "line 3: its sound file: cannot open it: No such file or directory (a relative "
            "path is taken from the manifest's directory"},
           {"fifo.wav,0\n", "line 2: its sound file: it is not a regular file"},
       }) {
    const std::string manifest = Write("m.csv", "path,label\n" + c.rows);
    const std::string message = Error(manifest);
    EXPECT_THAT(message, HasSubstr("data.train_path: " + manifest + ": " + c.error)) << c.rows;
    EXPECT_THAT(message, Not(HasSubstr("secret"))) << c.rows;
    EXPECT_THAT(message, Not(HasSubstr("hunter2"))) << c.rows;
    // The hint about shipped manifests is for a file that cannot be opened.
    EXPECT_EQ(message.find("relative path") != std::string::npos,
              c.error.find("cannot open") != std::string::npos)
        << c.rows;
  }
  v1::JobSpec regression = AudioSpec(Write("m.csv", "path,label\nok.wav,1\n"));
  regression.set_task("regression");
  EXPECT_THAT(std::string(LoadDatasets(regression).status().message()),
              HasSubstr("task: data.format audio holds labelled sounds"));
}

}  // namespace
}  // namespace trainctl::train::data_testing
