#include "cli/kube_flags.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>

namespace topogate::cli {

const std::string_view kube_flags_usage =
    "  --kubeconfig FILE     the current context's server, CA and credentials: a token, a client\n"
    "                        certificate or an exec plugin (default $KUBECONFIG)\n"
    "  --context NAME        another context of the kubeconfig\n"
    "  --server URL --token-file FILE --ca-file FILE   explicit API access\n"
    "  --in-cluster          the Pod's ServiceAccount (the default inside a cluster)\n";

namespace {

bool plugin_mode = false;

constexpr std::string_view value_flags[] = {"--kubeconfig", "--context", "--server", "--token-file",
                                            "--ca-file"};

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    auto colon = list.find(':', start);
    if (colon == std::string::npos) colon = list.size();
    if (colon > start) out.push_back(list.substr(start, colon - start));
    start = colon + 1;
  }
  return out;
}

std::string home_kubeconfig() {
  const char* home = std::getenv("HOME");
  if (!home || !*home) return {};
  std::string p = std::string(home) + "/.kube/config";
  return file_exists(p) ? p : std::string();
}

}  // namespace

void set_kubectl_plugin(bool on) { plugin_mode = on; }
bool kubectl_plugin() { return plugin_mode; }
std::string_view program_name() { return plugin_mode ? "kubectl topogate" : "topogate"; }

bool is_kube_value_flag(std::string_view name) {
  return std::find(std::begin(value_flags), std::end(value_flags), name) != std::end(value_flags);
}

void set_kube_flag(kube_flags& f, std::string_view name, const std::string& value) {
  if (name == "--in-cluster") {
    f.in_cluster = true;
  } else if (name == "--kubeconfig") {
    f.kubeconfig = value;
    f.saw_kubeconfig = true;
  } else if (name == "--context") {
    f.context = value;
  } else if (name == "--server") {
    f.server = value;
  } else if (name == "--token-file") {
    f.token_file = value;
  } else if (name == "--ca-file") {
    f.ca_file = value;
  }
}

std::optional<std::string> finish_kube_flags(kube_flags& f, bool offline) {
  const bool explicit_api = !f.server.empty() || !f.token_file.empty() || !f.ca_file.empty();
  if (explicit_api && (f.server.empty() || f.token_file.empty() || f.ca_file.empty()))
    return "--server, --token-file and --ca-file go together";
  const int online_ways =
      (explicit_api ? 1 : 0) + (f.saw_kubeconfig ? 1 : 0) + (f.in_cluster ? 1 : 0);
  if (online_ways > 1) return "choose one of --kubeconfig, --server or --in-cluster";
  if (offline && online_ways) return "read files or the API, not both";
  const char* env_kc = std::getenv("KUBECONFIG");
  const bool has_env_kc = env_kc != nullptr && *env_kc != '\0';
  if (offline) {
    if (!f.context.empty() && !has_env_kc) return "--context needs a kubeconfig";
    return std::nullopt;
  }
  if (!online_ways) {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const bool in_pod = host != nullptr && *host != '\0';
    if (plugin_mode) {
      // kubectl's order: $KUBECONFIG, ~/.kube/config, then the Pod's ServiceAccount.
      if (has_env_kc) {
        f.kubeconfig = env_kc;
      } else if (std::string home = home_kubeconfig(); !home.empty()) {
        f.kubeconfig = std::move(home);
      } else if (in_pod) {
        f.in_cluster = true;
      } else {
        return "no input: give --from DIR, -f FILE, --kubeconfig FILE, set $KUBECONFIG or create "
               "~/.kube/config";
      }
    } else if (in_pod) {
      f.in_cluster = true;
    } else if (has_env_kc) {
      f.kubeconfig = env_kc;  // the whole list; connect() merges it
    } else {
      return "no input: give --from DIR, -f FILE, --kubeconfig FILE or run in a cluster";
    }
  }
  if (!f.context.empty() && f.kubeconfig.empty()) return "--context needs a kubeconfig";
  return std::nullopt;
}

kube::connect_options connect_options(const kube_flags& f) {
  kube::connect_options o;
  if (!f.kubeconfig.empty()) {
    o.kubeconfigs =
        f.saw_kubeconfig ? std::vector<std::string>{f.kubeconfig} : split_list(f.kubeconfig);
    o.kubeconfigs_must_exist = f.saw_kubeconfig;
    o.context = f.context;
  } else if (!f.server.empty()) {
    o.access = {f.server, f.token_file, f.ca_file};
  }
  return o;
}

core::result<std::vector<std::string>> object_files(const std::string& dir,
                                                    const std::vector<std::string>& files) {
  std::vector<std::string> out;
  if (!dir.empty()) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return core::fail(core::errc::io, "cannot open directory " + dir);
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (!n.starts_with(".") &&
          (n.ends_with(".json") || n.ends_with(".yaml") || n.ends_with(".yml")))
        names.push_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) out.push_back(dir + "/" + n);
    if (out.empty()) return core::fail(core::errc::not_found, "no .json or .yaml files in " + dir);
  }
  out.insert(out.end(), files.begin(), files.end());
  return out;
}

}  // namespace topogate::cli
