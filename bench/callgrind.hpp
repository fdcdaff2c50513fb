#pragma once

// For the instruction-guard drivers (instr_*.cpp): instrumentation on only around the
// counted call, so valgrind runs everything else (corpus construction, warm-up)
// uninstrumented, which keeps the guard fast on a Debug build. Without valgrind's header
// the macros do nothing.
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif
