// AdmissionReview decoding and handling, as both webhook routes receive it.
// Properties beyond "no crash": the HTTP status is 200 (allowed or denied) or a 4xx
// (errored); a 200 body is an AdmissionReview that echoes request.uid; a denial carries at
// least one field error; every warning fits the apiserver's limit.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "admission/review.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace topogate;
  if (size < 1) return 0;
  // First byte: route and content type; the rest is the body.
  const auto r =
      (data[0] & 1) ? admission::route::model_deployments : admission::route::topology_sources;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  admission::request_meta meta;
  if (data[0] & 2) meta.content_type = "application/json; charset=utf-8";
  if (data[0] & 4) meta.content_type = "text/plain";

  static const admission::options opts;
  const admission::outcome out = admission::review(r, body, meta, opts);
  switch (out.result) {
    case admission::verdict::allowed:
    case admission::verdict::denied:
      fuzz::check(out.error == admission::failure::none, "a verdict carries no failure", out.body);
      fuzz::check(out.body.find("\"AdmissionReview\"") != std::string::npos,
                  "a verdict is an AdmissionReview", out.body);
      if (!out.uid.empty()) {
        std::string quoted;
        core::append_json_string(quoted, out.uid);
        fuzz::check(out.body.find(quoted) != std::string::npos, "the response echoes request.uid",
                    out.body);
      }
      break;
    case admission::verdict::errored:
      // Without a deadline in the request, nothing times out: an unprocessable request is a 4xx.
      fuzz::check(out.error != admission::failure::none &&
                      out.error != admission::failure::timeout && !out.message.empty() &&
                      out.body.empty(),
                  "an unprocessable request names its failure and why", out.message);
      break;
  }
  if (out.result == admission::verdict::denied) {
    fuzz::check(!out.errors.empty(), "a denial carries field errors", out.body);
  }
  return 0;
}
