// Coverage feedback for libFuzzer when the code is compiled by GCC.
//
// GCC has no -fsanitize=fuzzer; it can emit a call to __sanitizer_cov_trace_pc in every
// basic block and the trace-cmp hooks (which libFuzzer implements), but libFuzzer dropped
// its own trace-pc support. This file supplies it: each call site's return address is
// hashed into a table of 8-bit counters that libFuzzer registers as inline counters, the
// same feedback clang's -fsanitize-coverage=inline-8bit-counters gives it. scripts/fuzz.sh
// links a copy of libFuzzer in which its stub of the same symbol is made weak.
//
// (clang cannot compile the project against Debian's libstdc++ in C++20 mode:
// core/document.hpp nests std::pair<std::string, doc_node> inside doc_node, which GCC
// accepts and clang rejects.)
#include <cstddef>
#include <cstdint>

extern "C" void __sanitizer_cov_8bit_counters_init(std::uint8_t* start, std::uint8_t* stop);
extern "C" void __sanitizer_cov_pcs_init(const std::uintptr_t* start, const std::uintptr_t* stop);

namespace {

constexpr std::size_t counter_count = std::size_t{1} << 18;
alignas(64) std::uint8_t counters[counter_count];
// libFuzzer expects one {pc, flags} pair per counter; the "pc" is the counter's index.
std::uintptr_t pc_table[2 * counter_count];

struct registration {
  registration() {
    for (std::size_t i = 0; i < counter_count; ++i) pc_table[2 * i] = i + 1;
    __sanitizer_cov_8bit_counters_init(counters, counters + counter_count);
    __sanitizer_cov_pcs_init(pc_table, pc_table + 2 * counter_count);
  }
};
registration registered;

}  // namespace

extern "C" __attribute__((no_sanitize_coverage)) void __sanitizer_cov_trace_pc() {
  auto pc = reinterpret_cast<std::uintptr_t>(__builtin_return_address(0));
  pc *= 0x9E3779B97F4A7C15ull;  // Fibonacci hashing: spread nearby call sites
  ++counters[pc >> (64 - 18)];
}

// GCC also traces floating-point comparisons; libFuzzer has no use for them.
extern "C" __attribute__((no_sanitize_coverage)) void __sanitizer_cov_trace_cmpf(float, float) {}
extern "C" __attribute__((no_sanitize_coverage)) void __sanitizer_cov_trace_cmpd(double, double) {}
