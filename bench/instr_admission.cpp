// Instruction-count driver for the CI guard (bench/instr_guard.py): handles N admission
// reviews in-process (default 10 000: alternately the ~2.6 KiB valid and invalid
// TopologySource reviews of bench/http/), through the same pure function the webhook
// route calls. Only instr_region() is counted (callgrind --collect-atstart=no
// --toggle-collect=instr_region); reading the files and one warm-up review of each stay out.
//
//   instr_admission VALID.json INVALID.json [N]

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "admission/review.hpp"
#include "bench/callgrind.hpp"

namespace {

using namespace topogate::admission;

bool read_file(const char* path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

struct tally {
  std::size_t allowed = 0, denied = 0, other = 0, bytes = 0;
};

}  // namespace

extern "C" __attribute__((noinline)) void instr_region(const std::string& valid,
                                                       const std::string& invalid, std::size_t n,
                                                       tally& t) {
  const request_meta meta{std::string_view("application/json"), std::nullopt};
  const options opts;
  for (std::size_t i = 0; i < n; ++i) {
    const outcome out = review(route::topology_sources, i % 2 == 0 ? valid : invalid, meta, opts);
    if (out.result == verdict::allowed)
      ++t.allowed;
    else if (out.result == verdict::denied)
      ++t.denied;
    else
      ++t.other;
    t.bytes += out.body.size();
  }
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: instr_admission VALID.json INVALID.json [N]\n");
    return 2;
  }
  std::string valid, invalid;
  if (!read_file(argv[1], valid) || !read_file(argv[2], invalid)) {
    std::fprintf(stderr, "instr_admission: cannot read the review files\n");
    return 2;
  }
  const std::size_t n = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 10000;
  {
    // Warm-up outside the counted region (first-use allocations, lazy statics).
    const request_meta meta{std::string_view("application/json"), std::nullopt};
    if (review(route::topology_sources, valid, meta, {}).result != verdict::allowed ||
        review(route::topology_sources, invalid, meta, {}).result != verdict::denied) {
      std::fprintf(stderr, "instr_admission: expected one allowed and one denied review\n");
      return 2;
    }
  }
  tally t;
  CALLGRIND_START_INSTRUMENTATION;
  instr_region(valid, invalid, n, t);
  CALLGRIND_STOP_INSTRUMENTATION;
  std::printf("reviews %zu\nallowed %zu\ndenied %zu\nother %zu\nresponse_bytes %zu\n", n, t.allowed,
              t.denied, t.other, t.bytes);
  return t.other == 0 && t.allowed == (n + 1) / 2 && t.denied == n / 2 ? 0 : 2;
}
