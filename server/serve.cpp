#include "server/serve.hpp"

#include <pthread.h>

#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "core/field_error.hpp"
#include "inventory/registry.hpp"
#include "server/audit_loop.hpp"
#include "server/log.hpp"
#include "server/metrics.hpp"
#include "server/metrics_auth.hpp"
#include "server/ownership_view.hpp"
#include "server/server.hpp"
#include "server/tls.hpp"
#include "server/workload_impact.hpp"

namespace topogate::server {

namespace {
bool parse_uint(std::string_view s, unsigned max, unsigned& out) {
  unsigned v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v > max) return false;
  out = v;
  return true;
}

log_level level_of(std::string_view s) {
  if (s == "debug") return log_level::debug;
  if (s == "warn") return log_level::warn;
  if (s == "error") return log_level::error;
  return log_level::info;
}
}  // namespace

core::result<void> apply_overrides(serve_config& cfg, std::span<const std::string_view> args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a != "--port" && a != "--health-port" && a != "--threads" && a != "--address") {
      return core::fail(core::errc::invalid_argument, "unknown option \"" + std::string(a) + "\"");
    }
    if (i + 1 >= args.size())
      return core::fail(core::errc::invalid_argument, std::string(a) + " needs a value");
    const std::string_view v = args[++i];
    if (a == "--address") {
      cfg.address = std::string(v);
      continue;
    }
    unsigned n = 0;
    if (!parse_uint(v, a == "--threads" ? 1024 : 65535, n)) {
      return core::fail(core::errc::invalid_argument,
                        std::string(a) + ": \"" + std::string(v) + "\" is not a valid number");
    }
    (a == "--port" ? cfg.port : a == "--health-port" ? cfg.health_port : cfg.threads) = n;
  }
  return {};
}

int serve(serve_config cfg, const serve_hooks& hooks) {
  {
    // Every thread serve() starts inherits this mask: a write to a pipe or socket whose reader
    // is gone fails with EPIPE instead of ending the process (a log line written to a stderr
    // pipe by the thread that logs it included). Child processes get an empty mask.
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, nullptr);
  }
  set_log_level(level_of(cfg.log_level));
  metrics m;
  m.log_drops_from(&log_lines_dropped);
  credential_watcher creds(cfg, &m);
  if (const auto loaded = creds.load(); !loaded) {
    log(log_level::error, "cannot load credentials", {{"error", loaded.error().message}});
    return 2;
  }
  // metrics.auth: a configuration that cannot work stops the start, as credentials do.
  std::unique_ptr<token_reviewer> reviewer;
  if (cfg.metrics.auth == metrics_auth_mode::kubernetes) {
    core::result<std::unique_ptr<token_reviewer>> made =
        core::fail(core::errc::invalid_argument, "this build has no Kubernetes client");
    if (hooks.make_token_reviewer) made = hooks.make_token_reviewer(cfg);
    if (!made) {
      log(log_level::error, "metrics.auth kubernetes: cannot reach the Kubernetes API",
          {{"error", made.error().message}});
      return 2;
    }
    reviewer = std::move(*made);
  }
  metrics_gate gate(cfg.metrics, std::move(reviewer), &m);
  if (const auto started = gate.start(); !started) {
    log(log_level::error, "cannot load the metrics token file",
        {{"error", started.error().message}});
    return 2;
  }
  // audit.enabled: the API must at least be located (in a Pod, or store.apiServer), as for
  // metrics.auth; whether it answers is each run's business.
  std::unique_ptr<audit_loop> audit;
  if (cfg.audit.enabled) {
    core::result<std::unique_ptr<audit_source>> source =
        core::fail(core::errc::invalid_argument, "this build has no Kubernetes client");
    if (hooks.make_audit_source) source = hooks.make_audit_source(cfg);
    if (!source) {
      log(log_level::error,
          "audit.enabled: no Kubernetes API to list from (store.apiServer, or run in a Pod)",
          {{"error", source.error().message}});
      return 2;
    }
    audit = std::make_unique<audit_loop>(cfg.audit, std::move(*source), m);
  }
  // admission.ownershipCheck.enabled: located as for the audit; until its first list answers,
  // admission answers without the ownership warning.
  std::unique_ptr<ownership_watch> ownership;
  if (cfg.ownership_check.enabled) {
    core::result<std::unique_ptr<ownership_watch>> made =
        core::fail(core::errc::invalid_argument, "this build has no Kubernetes client");
    if (hooks.make_ownership_view) made = hooks.make_ownership_view(cfg);
    if (!made) {
      log(log_level::error,
          "admission.ownershipCheck.enabled: no Kubernetes API to list from (store.apiServer, or "
          "run in a Pod)",
          {{"error", made.error().message}});
      return 2;
    }
    ownership = std::move(*made);
    cfg.admission.ownership = ownership.get();
  }
  inventory::registry_observer obs;
  obs.on_attempt = [&m](const std::string& inv, const inventory::attempt& a) {
    // The registry logs each decision itself; this only counts them.
    m.reconcile_attempt(inv, a.accepted);
    m.rejection(inv, a);
    m.profile_impact(inv, a);
  };
  obs.on_log = [](std::string_view level, std::string_view inv, std::string_view message) {
    log(level_of(level), message, {{"component", "inventory"}, {"inventory", inv}});
  };
  // workloadImpact: located as for the audit; each dry run (and each push to an inventory
  // with maxStrandedWorkloads) lists what it needs.
  std::unique_ptr<cluster_lister> lister;
  std::unique_ptr<workload_impact> workloads;
  if (!cfg.workload_impact.inventories.empty()) {
    core::result<std::unique_ptr<cluster_lister>> made =
        core::fail(core::errc::invalid_argument, "this build has no Kubernetes client");
    if (hooks.make_cluster_lister) made = hooks.make_cluster_lister(cfg);
    if (!made) {
      log(log_level::error,
          "workloadImpact: no Kubernetes API to list from (store.apiServer, or run in a Pod)",
          {{"error", made.error().message}});
      return 2;
    }
    lister = std::move(*made);
  }
  std::unique_ptr<inventory::registry> reg;
  try {
    auto deps = hooks.dependencies ? hooks.dependencies(cfg)
                                   : inventory::make_file_dependencies(cfg.registry.store);
    if (lister) deps.stranded = stranded_counter(*lister, cfg.workload_impact.timeout);
    reg = std::make_unique<inventory::registry>(cfg.registry, std::move(deps),
                                                inventory::system_clock(), std::move(obs));
    // Returns at once: the store and the Kubernetes API are read in the background.
    reg->start();
  } catch (const std::exception& e) {
    log(log_level::error, "cannot start the inventories", {{"error", e.what()}});
    return 1;
  }
  if (lister) {
    workloads = std::make_unique<workload_impact>(cfg.workload_impact, std::move(lister), *reg);
    cfg.dry_run = workloads.get();
  }
  server srv(cfg, *reg, m, creds, &gate);
  if (auto listening = srv.listen(); !listening) {
    log(log_level::error, "cannot listen", {{"error", listening.error().message}});
    reg->stop();
    return 1;
  }
  // Its own thread: the first run starts now and never holds up serving.
  if (audit) audit->start();
  if (ownership) ownership->start();
  const unsigned short port = srv.port();
  srv.run([&] {
    if (hooks.on_listening) hooks.on_listening(port);
  });
  // A run in progress is aborted: the API call is cancelled, the thread ends.
  if (audit) audit->stop();
  if (ownership) ownership->stop();
  // Before the server (and its io_context) goes: a review still running answers its
  // connection now.
  gate.stop();
  if (!reg->stop(cfg.limits.shutdown_timeout)) {
    // A store call the kernel does not return from (a frozen disk): its lane still uses the
    // registry, so the process ends here instead of destroying it.
    log(log_level::error,
        "a store call is still blocked after the shutdown timeout; exiting without waiting for it",
        {});
    log_flush(log_exit_flush);
    std::fflush(nullptr);
    std::_Exit(0);
  }
  return 0;
}

}  // namespace topogate::server
