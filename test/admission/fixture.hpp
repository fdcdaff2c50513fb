#pragma once

// What the admission tests share: the AdmissionReview fixtures the integration tests post
// (test/integration/fixtures/admission/) and the request metadata of a JSON POST.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "admission/review.hpp"

namespace topogate::admission::test {

inline std::string fixture(const std::string& name) {
  std::ifstream in(std::string(TOPOGATE_SOURCE_DIR) + "/test/integration/fixtures/admission/" +
                   name);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << name;
  return ss.str();
}

inline const request_meta json_meta{std::string_view("application/json"), std::nullopt};

}  // namespace topogate::admission::test
