#pragma once

// data.audio: how an audio manifest's sound files become log-mel
// spectrograms (docs/job-spec.md, "Audio").

#include <cstdint>
#include <string>
#include <vector>

#include "common/spec_reader.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl {

// Reads data.audio from the data section `s` (after data.format): filled
// with its defaults for format audio, refused for any other format.
void ReadAudioSpec(SpecReader& s, v1::DataSpec* d, std::vector<std::string>* errors);

// Samples per clip, and spectrogram frames per clip (the STFT is centred:
// one frame every hop_length samples, the first at sample 0).
int64_t AudioClipSamples(const v1::AudioSpec& audio);
int64_t AudioFrames(const v1::AudioSpec& audio);

}  // namespace trainctl
