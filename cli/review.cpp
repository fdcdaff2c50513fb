// topogate review FILE: the webhook's AdmissionReview handler on a file; the response
// (or the HTTP error's Status) on stdout. Exit 0 allowed, 1 denied, 2 malformed.
#include "admission/review.hpp"

#include <cstdio>
#include <string>

#include "cli/commands.hpp"
#include "server/router.hpp"
#include "util/file.hpp"

namespace topogate::cli {

int run_review(args a) {
  if (a.size() != 1) {
    std::fputs("usage: topogate review FILE   (an AdmissionReview request; - reads stdin)\n",
               stderr);
    return 2;
  }
  const std::string path = a[0] == "-" ? "/dev/stdin" : std::string(a[0]);
  const auto read = util::read_file(path, 64u << 20);
  if (!read) {
    std::fprintf(stderr, "topogate review: %s\n", read.error().message.c_str());
    return 2;
  }
  const std::string& body = *read;
  admission::options opts;
  // The file is the whole request: the route follows the object's kind.
  const auto out = admission::review_on_its_route(body, {}, opts);
  if (out.result == admission::verdict::errored) {
    // What the webhook would answer: the Status, and its HTTP status on stderr.
    const auto res = server::admission_failure(out);
    const auto& status = res.body().data;
    std::fwrite(status.data(), 1, status.size(), stdout);
    std::fputc('\n', stdout);
    std::fprintf(stderr, "topogate review: HTTP %u: %s\n", res.result_int(), out.message.c_str());
    return 2;
  }
  std::fwrite(out.body.data(), 1, out.body.size(), stdout);
  std::fputc('\n', stdout);
  return out.result == admission::verdict::denied ? 1 : 0;
}

}  // namespace topogate::cli
