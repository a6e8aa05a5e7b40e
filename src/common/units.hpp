// Units: byte multiples and time conversions. GiB (2^30) and GB (10^9) are never mixed:
// every quantity carries its unit in its name (_bytes, _gib, _gb, _ns, _s, _gbps = 10^9 B/s).
#pragma once

#include <cstdint>

namespace mplan {

inline constexpr int64_t kKiB = int64_t{1} << 10;
inline constexpr int64_t kMiB = int64_t{1} << 20;
inline constexpr int64_t kGiB = int64_t{1} << 30;
inline constexpr double kGB = 1e9;
inline constexpr double kTFLOP = 1e12;
inline constexpr int64_t kNsPerUs = 1000;
inline constexpr int64_t kNsPerMs = 1000 * 1000;
inline constexpr int64_t kNsPerS = 1000 * 1000 * 1000;

inline constexpr double bytes_to_gib(double bytes) { return bytes / static_cast<double>(kGiB); }
inline constexpr double ns_to_s(int64_t ns) { return static_cast<double>(ns) * 1e-9; }
inline constexpr double ns_to_ms(int64_t ns) { return static_cast<double>(ns) * 1e-6; }

}  // namespace mplan
