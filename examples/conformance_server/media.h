// Tiny media files the fixtures return, base64-encoded: a 1x1 red PNG and a WAV holding
// eight samples of 8 kHz 8-bit mono silence. Valid files, so clients can decode them.
#pragma once

namespace conformance {

inline constexpr const char* kRedPixelPngBase64 =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
inline constexpr const char* kSilentWavBase64 =
    "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

}  // namespace conformance
