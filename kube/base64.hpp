#pragma once
// Base64 as the Kubernetes API and its files carry bytes: a ConfigMap's binaryData, a
// kubeconfig's *-data fields, an ExecCredential's certificate-authority-data.

#include <string>
#include <string_view>

namespace topogate::kube {

[[nodiscard]] std::string base64_encode(std::string_view in);
// Line breaks and spaces are skipped (a kubeconfig's data may be wrapped); false when the rest
// is not base64.
bool base64_decode(std::string_view in, std::string& out);

}  // namespace topogate::kube
