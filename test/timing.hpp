#pragma once
// How long a test may wait beyond the timeout a bound is derived from.
//
// A bound that tests isolation (an answer at a configured deadline, a call that does not
// wait out another's timeout) is written as "the configured timeout + scheduling_margin".
// The margin is two seconds of scheduling slack on a shared two-core machine (CI's, with a
// build beside the tests: load 10-20; a test may start a process), times how much slower the
// sanitizer build runs the same code: ThreadSanitizer 5-15x (15 taken), AddressSanitizer + UBSan
// about 2-3x (3). Anything tighter than that is asserted by the order of events, not by a duration.
#include <chrono>

namespace topogate::test_timing {

inline constexpr int sanitizer_slowdown =
#if defined(__SANITIZE_THREAD__)
    15;
#elif defined(__SANITIZE_ADDRESS__)
    3;
#else
    1;
#endif

inline constexpr std::chrono::milliseconds scheduling_margin{2000 * sanitizer_slowdown};

// Seconds, for tests that measure with a double.
inline constexpr double margin_seconds = 2.0 * sanitizer_slowdown;

}  // namespace topogate::test_timing
