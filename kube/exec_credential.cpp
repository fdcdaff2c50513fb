#include "kube/exec_credential.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "core/field_error.hpp"
#include "core/time.hpp"
#include "kube/base64.hpp"
#include "util/file.hpp"

extern char** environ;

namespace topogate::kube {

namespace {

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::string plugin_name(const exec_config& cfg) { return "exec plugin " + quoted(cfg.command); }

bool is_integer(std::string_view s) {
  if (!s.empty() && s.front() == '-') s.remove_prefix(1);
  return !s.empty() && s.size() < 19 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A kubeconfig extension as JSON: strings stay strings; YAML booleans, integers and nulls
// become JSON ones (what the plugin would get from kubectl's JSON encoding of the object).
void append_doc_json(std::string& out, const core::doc_node& n) {
  using tag = core::doc_node::scalar_tag;
  switch (n.k) {
    case core::doc_node::kind::null:
      out += "null";
      return;
    case core::doc_node::kind::scalar:
      if ((n.tag == tag::bool_ && (n.text == "true" || n.text == "false")) ||
          (n.tag == tag::int_ && is_integer(n.text))) {
        out += n.text;
      } else {
        core::append_json_string(out, n.text);
      }
      return;
    case core::doc_node::kind::sequence: {
      out.push_back('[');
      bool first = true;
      for (const auto& item : n.items) {
        if (!first) out.push_back(',');
        first = false;
        append_doc_json(out, item);
      }
      out.push_back(']');
      return;
    }
    case core::doc_node::kind::mapping: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, value] : n.map) {
        if (!first) out.push_back(',');
        first = false;
        core::append_json_string(out, key);
        out.push_back(':');
        append_doc_json(out, value);
      }
      out.push_back('}');
      return;
    }
  }
}

bool executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// kubectl's lookup: a command with a '/' is a path (relative ones from the kubeconfig's
// folder); a bare name is looked up on PATH.
std::optional<std::string> find_command(const exec_config& cfg) {
  if (cfg.command.find('/') != std::string::npos) {
    std::string path = util::resolve_path(cfg.base_dir, cfg.command);
    return executable_file(path) ? std::optional(path) : std::nullopt;
  }
  const char* env_path = std::getenv("PATH");
  const std::string_view dirs = env_path && *env_path ? env_path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    auto colon = dirs.find(':', start);
    if (colon == std::string_view::npos) colon = dirs.size();
    std::string dir(dirs.substr(start, colon - start));
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + cfg.command;
    if (executable_file(candidate)) return candidate;
    start = colon + 1;
  }
  return std::nullopt;
}

struct spawn_resources {
  int read_fd = -1;
  bool fa_init = false, attr_init = false;
  posix_spawn_file_actions_t fa{};
  posix_spawnattr_t attr{};
  ~spawn_resources() {
    if (read_fd >= 0) ::close(read_fd);
    if (fa_init) posix_spawn_file_actions_destroy(&fa);
    if (attr_init) posix_spawnattr_destroy(&attr);
  }
};

using steady = std::chrono::steady_clock;

int ms_until(steady::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 1000));
}

// Kills the plugin (its process group when it has one of its own) and reaps it.
void kill_and_reap(pid_t pid, bool own_group) {
  ::kill(own_group ? -pid : pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

core::result<exec_config> parse_exec_config(const core::doc_node& exec, std::string base_dir,
                                            const std::string& where) {
  const auto invalid = [&](const std::string& what) {
    return core::fail(core::errc::invalid_argument, where + ": exec." + what);
  };
  if (!exec.is_mapping())
    return core::fail(core::errc::invalid_argument, where + ": exec is not a mapping");
  exec_config cfg;
  cfg.base_dir = std::move(base_dir);
  const auto text = [&](std::string_view key) {
    const core::doc_node* v = exec.find(key);
    return v && v->is_scalar() ? v->text : std::string();
  };
  cfg.command = text("command");
  if (cfg.command.empty()) return invalid("command is required");
  cfg.api_version = text("apiVersion");
  if (cfg.api_version.empty())
    return invalid("apiVersion is required (" + std::string(exec_api_v1) + ")");
  if (cfg.api_version != exec_api_v1 && cfg.api_version != exec_api_v1beta1)
    return invalid("apiVersion " + quoted(cfg.api_version) + " is not supported (" +
                   std::string(exec_api_v1) + " or " + std::string(exec_api_v1beta1) + ")");
  if (const core::doc_node* args = exec.find("args"); args && !args->is_null()) {
    if (!args->is_sequence()) return invalid("args is not a list");
    for (const auto& a : args->items) {
      if (!a.is_scalar()) return invalid("args has an item that is not a string");
      cfg.args.push_back(a.text);
    }
  }
  if (const core::doc_node* env = exec.find("env"); env && !env->is_null()) {
    if (!env->is_sequence()) return invalid("env is not a list");
    for (std::size_t i = 0; i < env->items.size(); ++i) {
      const auto& e = env->items[i];
      const core::doc_node* name = e.find("name");
      const core::doc_node* value = e.find("value");
      const std::string at = "env[" + std::to_string(i) + "]";
      if (!name || !name->is_scalar() || name->text.empty())
        return invalid(at + ".name is required");
      if (name->text.find('=') != std::string::npos || name->text.find('\0') != std::string::npos)
        return invalid(at + ".name is not a variable name");
      if (!value || !value->is_scalar()) return invalid(at + ".value is required");
      cfg.env.emplace_back(name->text, value->text);
    }
  }
  cfg.install_hint = text("installHint");
  if (const std::string p = text("provideClusterInfo"); !p.empty()) {
    if (p != "true" && p != "false") return invalid("provideClusterInfo is not true or false");
    cfg.provide_cluster_info = p == "true";
  }
  const std::string mode = text("interactiveMode");
  if (mode.empty()) {
    // client.authentication.k8s.io/v1 made the field required; v1beta1 defaults it.
    if (cfg.api_version == exec_api_v1)
      return invalid("interactiveMode is required for " + std::string(exec_api_v1) +
                     " (Never, IfAvailable or Always)");
    cfg.interactive = interactive_mode::if_available;
  } else if (mode == "Never") {
    cfg.interactive = interactive_mode::never;
  } else if (mode == "IfAvailable") {
    cfg.interactive = interactive_mode::if_available;
  } else if (mode == "Always") {
    cfg.interactive = interactive_mode::always;
  } else {
    return invalid("interactiveMode " + quoted(mode) + " is not Never, IfAvailable or Always");
  }
  return cfg;
}

std::string exec_cluster_json(std::string_view server, std::string_view ca_pem,
                              std::string_view tls_server_name, const core::doc_node* config) {
  std::string out = "{\"server\":";
  core::append_json_string(out, server);
  if (!tls_server_name.empty()) {
    out += ",\"tls-server-name\":";
    core::append_json_string(out, tls_server_name);
  }
  if (!ca_pem.empty()) {
    out += ",\"certificate-authority-data\":";
    core::append_json_string(out, base64_encode(ca_pem));
  }
  if (config != nullptr) {
    out += ",\"config\":";
    append_doc_json(out, *config);
  }
  out += "}";
  return out;
}

std::string exec_info_json(const exec_config& cfg, bool interactive) {
  std::string out = "{\"kind\":\"ExecCredential\",\"apiVersion\":";
  core::append_json_string(out, cfg.api_version);
  out += ",\"spec\":{";
  if (cfg.provide_cluster_info && !cfg.cluster_json.empty())
    out += "\"cluster\":" + cfg.cluster_json + ",";
  out += std::string("\"interactive\":") + (interactive ? "true" : "false") + "}}";
  return out;
}

core::result<exec_credential> parse_exec_credential(std::string_view output,
                                                    const exec_config& cfg) {
  const std::string who = plugin_name(cfg);
  const auto invalid = [&](const std::string& what) {
    return core::fail(core::errc::invalid_argument, who + " " + what);
  };
  core::decode_limits limits;
  limits.max_bytes = std::max<std::size_t>(output.size(), 1);
  limits.max_depth = 32;
  limits.max_expanded_nodes = 1u << 16;
  // The decoder's messages quote the input: only whether it decoded is used.
  const auto d = core::decode_json(output, "", limits);
  if (!d.ok() || !d.root.is_mapping())
    return invalid("printed no ExecCredential (its output is not a JSON object)");
  const core::doc_node* kind = d.root.find("kind");
  if (!kind || kind->text != "ExecCredential")
    return invalid("printed JSON whose kind is not ExecCredential");
  const core::doc_node* api = d.root.find("apiVersion");
  if (!api || api->text != cfg.api_version)
    return invalid("printed an ExecCredential whose apiVersion is not " + cfg.api_version +
                   " (the kubeconfig's exec.apiVersion)");
  const core::doc_node* status = d.root.find("status");
  if (!status || !status->is_mapping())
    return invalid("printed an ExecCredential without a status");
  const auto field = [&](std::string_view key) -> core::result<std::string> {
    const core::doc_node* v = status->find(key);
    if (!v || v->is_null()) return std::string();
    if (!v->is_scalar())
      return invalid("printed an ExecCredential whose status." + std::string(key) +
                     " is not a string");
    return v->text;
  };
  exec_credential cred;
  auto token = field("token");
  if (!token) return std::move(token).error();
  auto cert = field("clientCertificateData");
  if (!cert) return std::move(cert).error();
  auto key = field("clientKeyData");
  if (!key) return std::move(key).error();
  cred.token = std::move(*token);
  cred.client_cert_pem = std::move(*cert);
  cred.client_key_pem = std::move(*key);
  if (cred.client_cert_pem.empty() != cred.client_key_pem.empty())
    return invalid(cred.client_cert_pem.empty()
                       ? "printed a clientKeyData without its clientCertificateData"
                       : "printed a clientCertificateData without its clientKeyData");
  if (cred.token.empty() && cred.client_cert_pem.empty())
    return invalid(
        "printed an ExecCredential with neither a token nor clientCertificateData and "
        "clientKeyData");
  if (!cred.client_cert_pem.empty()) {
    if (auto ok = check_client_identity(cred.client_cert_pem, cred.client_key_pem); !ok)
      return invalid("printed an unusable client certificate: " + ok.error().message);
  }
  auto expiry = field("expirationTimestamp");
  if (!expiry) return std::move(expiry).error();
  if (!expiry->empty()) {
    cred.expires = core::parse_rfc3339(*expiry);
    if (!cred.expires)
      return invalid("printed an expirationTimestamp that is not an RFC 3339 time");
  }
  return cred;
}

exec_run_options default_exec_run_options() {
  exec_run_options o;
  o.stdin_is_terminal = ::isatty(0) == 1;
  return o;
}

core::result<std::string> run_exec_plugin(const exec_config& cfg, const exec_run_options& opt) {
  const std::string who = plugin_name(cfg);
  const auto failed = [&](core::errc code, const std::string& what) {
    return core::fail(code, who + " " + what);
  };
  bool interactive = false;
  switch (cfg.interactive) {
    case interactive_mode::never:
      interactive = false;
      break;
    case interactive_mode::if_available:
      interactive = opt.stdin_is_terminal;
      break;
    case interactive_mode::always:
      if (!opt.stdin_is_terminal)
        return failed(core::errc::invalid_argument,
                      "needs a terminal (interactiveMode Always) and standard input is not one");
      interactive = true;
      break;
  }
  const auto path = find_command(cfg);
  if (!path) {
    std::string msg =
        cfg.command.find('/') != std::string::npos
            ? "not found: no executable file " + util::resolve_path(cfg.base_dir, cfg.command)
            : "not found: no executable " + quoted(cfg.command) + " on PATH";
    if (!cfg.install_hint.empty()) msg += "\n" + cfg.install_hint;
    return failed(core::errc::not_found, msg);
  }

  std::vector<std::string> arg_strings;
  arg_strings.push_back(cfg.command);
  arg_strings.insert(arg_strings.end(), cfg.args.begin(), cfg.args.end());
  std::vector<char*> argv;
  for (auto& a : arg_strings) argv.push_back(a.data());
  argv.push_back(nullptr);

  // Our environment, then the kubeconfig's env (which wins), then KUBERNETES_EXEC_INFO.
  std::vector<std::string> env_strings;
  const auto overridden = [&](std::string_view entry) {
    const std::string_view name = entry.substr(0, entry.find('='));
    if (name == "KUBERNETES_EXEC_INFO") return true;
    return std::any_of(cfg.env.begin(), cfg.env.end(),
                       [&](const auto& e) { return e.first == name; });
  };
  for (char** e = environ; e != nullptr && *e != nullptr; ++e)
    if (!overridden(*e)) env_strings.emplace_back(*e);
  for (const auto& [name, value] : cfg.env) env_strings.push_back(name + "=" + value);
  env_strings.push_back("KUBERNETES_EXEC_INFO=" + exec_info_json(cfg, interactive));
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  spawn_resources res;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return failed(core::errc::internal, "cannot run: pipe: " + core::errno_text(errno));
  res.read_fd = fds[0];
  const int write_fd = fds[1];
  const auto close_write = [&] { ::close(write_fd); };
  if (posix_spawn_file_actions_init(&res.fa) != 0) {
    close_write();
    return failed(core::errc::internal, "cannot run: out of memory");
  }
  res.fa_init = true;
  // stdout is the pipe; stderr is ours (the plugin's prompts and errors reach the user);
  // stdin is ours only when it may interact. Every other descriptor is close-on-exec.
  posix_spawn_file_actions_adddup2(&res.fa, write_fd, 1);
  if (!interactive) posix_spawn_file_actions_addopen(&res.fa, 0, "/dev/null", O_RDONLY, 0);
  if (posix_spawnattr_init(&res.attr) != 0) {
    close_write();
    return failed(core::errc::internal, "cannot run: out of memory");
  }
  res.attr_init = true;
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  // Without a terminal the plugin gets a process group of its own, so that a timeout kills
  // what it started too; with one it stays in ours (a background group may not read the tty).
  const bool own_group = !interactive;
  if (own_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&res.attr, 0);
  }
  posix_spawnattr_setflags(&res.attr, flags);
  posix_spawnattr_setsigmask(&res.attr, &none);
  posix_spawnattr_setsigdefault(&res.attr, &defaults);

  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, path->c_str(), &res.fa, &res.attr, argv.data(), envp.data());
  close_write();
  if (rc != 0)
    return failed(core::errc::unavailable, "cannot run " + *path + ": " + core::errno_text(rc));

  const auto deadline = steady::now() + opt.timeout;
  const auto timed_out = [&] {
    kill_and_reap(pid, own_group);
    return failed(core::errc::unavailable,
                  "did not finish within " + core::seconds_text(opt.timeout) + " (killed)");
  };
  std::string out;
  char buf[16384];
  for (;;) {
    if (steady::now() >= deadline) return timed_out();
    pollfd p{res.read_fd, POLLIN, 0};
    const int n = ::poll(&p, 1, std::max(ms_until(deadline), 1));
    if (n < 0 && errno != EINTR) {
      kill_and_reap(pid, own_group);
      return failed(core::errc::internal, "cannot read its output: " + core::errno_text(errno));
    }
    if (n <= 0) continue;
    const ssize_t got = ::read(res.read_fd, buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      kill_and_reap(pid, own_group);
      return failed(core::errc::internal, "cannot read its output: " + core::errno_text(errno));
    }
    if (got == 0) break;
    out.append(buf, static_cast<std::size_t>(got));
    if (out.size() > opt.max_output) {
      kill_and_reap(pid, own_group);
      return failed(core::errc::too_large,
                    "printed more than " + std::to_string(opt.max_output) + " bytes (killed)");
    }
  }
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR)
      return failed(core::errc::internal, "cannot wait for it: " + core::errno_text(errno));
    if (steady::now() >= deadline) return timed_out();
    ::poll(nullptr, 0, 5);
  }
  if (WIFSIGNALED(status))
    return failed(core::errc::unavailable,
                  "was killed by signal " + std::to_string(WTERMSIG(status)));
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    return failed(core::errc::unavailable,
                  "exited with status " + std::to_string(WEXITSTATUS(status)));
  return out;
}

exec_credential_source::exec_credential_source(exec_config cfg, exec_run_options opt, clock_fn now)
    : cfg_(std::move(cfg)), opt_(opt), now_(std::move(now)) {}

core::result<credential> exec_credential_source::get(bool refresh) {
  std::lock_guard lk(mu_);
  const bool fresh = cached_ && (!cached_->expires || now_() < *cached_->expires);
  if (refresh || !fresh) {
    cached_.reset();
    ++runs_;
    auto output = run_exec_plugin(cfg_, opt_);
    if (!output) return std::move(output).error();
    auto cred = parse_exec_credential(*output, cfg_);
    if (!cred) return std::move(cred).error();
    cached_ = std::move(*cred);
  }
  return credential{cached_->token, cached_->client_cert_pem, cached_->client_key_pem};
}

int exec_credential_source::runs() const {
  std::lock_guard lk(mu_);
  return runs_;
}

}  // namespace topogate::kube
