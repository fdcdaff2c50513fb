#include "kube/endpoint.hpp"

#include <cstdlib>

namespace topogate::kube {

core::result<endpoint> resolve_endpoint(const api_access& access) {
  constexpr std::string_view sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  endpoint out;
  std::string url = access.server;
  if (url.empty()) {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    if (host == nullptr || *host == '\0') {
      return core::fail(core::errc::invalid_argument,
                        "no Kubernetes API server configured and KUBERNETES_SERVICE_HOST is not "
                        "set (not in a cluster)");
    }
    out.host = host;
    out.port = port != nullptr && *port != '\0' ? port : "443";
  } else {
    if (url.starts_with("https://")) {
      url.erase(0, 8);
    } else {
      return core::fail(core::errc::invalid_argument,
                        "Kubernetes API server must be an https:// URL");
    }
    if (const auto slash = url.find('/'); slash != std::string::npos) url.erase(slash);
    if (!url.empty() && url.front() == '[') {
      const auto close = url.find(']');
      if (close == std::string::npos)
        return core::fail(core::errc::invalid_argument, "bad Kubernetes API server URL");
      out.host = url.substr(1, close - 1);
      if (close + 2 < url.size() && url[close + 1] == ':') out.port = url.substr(close + 2);
    } else if (const auto colon = url.rfind(':'); colon != std::string::npos) {
      out.host = url.substr(0, colon);
      out.port = url.substr(colon + 1);
    } else {
      out.host = url;
    }
  }
  out.token_file = access.token_file.empty() ? std::string(sa_dir) + "/token" : access.token_file;
  out.ca_file = access.ca_file.empty() ? std::string(sa_dir) + "/ca.crt" : access.ca_file;
  if (out.host.empty())
    return core::fail(core::errc::invalid_argument, "bad Kubernetes API server URL");
  return out;
}

}  // namespace topogate::kube
