#include "admission/review.hpp"

#include <simdjson.h>

#include <algorithm>

#include "admission/ownership.hpp"
#include "core/document.hpp"
#include "core/json_reuse.hpp"
#include "core/k8s_status.hpp"

namespace topogate::admission {

namespace ondemand = simdjson::ondemand;

std::string_view to_string(failure f) noexcept {
  switch (f) {
    case failure::none:
      return "none";
    case failure::bad_request:
      return "bad request";
    case failure::too_large:
      return "too large";
    case failure::unsupported_media_type:
      return "unsupported media type";
    case failure::timeout:
      return "timeout";
  }
  return "bad request";
}

std::string_view to_string(verdict v) noexcept {
  switch (v) {
    case verdict::allowed:
      return "allowed";
    case verdict::denied:
      return "denied";
    case verdict::errored:
      return "errored";
  }
  return "errored";
}

bool is_json_content_type(std::string_view ct) noexcept {
  const auto semi = ct.find(';');
  std::string_view media = ct.substr(0, semi);
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
  while (!media.empty() && (media.front() == ' ' || media.front() == '\t')) media.remove_prefix(1);
  constexpr std::string_view want = "application/json";
  return media.size() == want.size() &&
         std::equal(media.begin(), media.end(), want.begin(), [](char a, char b) {
           return (a >= 'A' && a <= 'Z' ? static_cast<char>(a - 'A' + 'a') : a) == b;
         });
}

std::string sanitize_warning(std::string_view w) {
  std::string out;
  out.reserve(std::min(w.size(), max_warning_length));
  for (const char ch : w) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) continue;
    out.push_back(ch);
  }
  if (out.size() > max_warning_length) {
    std::size_t cut = max_warning_length;
    // Never split a UTF-8 sequence: back up over continuation bytes.
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0) == 0x80) --cut;
    out.resize(cut);
  }
  return out;
}

namespace {

// Reviews up to this size leave their object's tree in the decoder for the next review to
// reuse (and the convenience overload keeps a decoder per thread for them).
constexpr std::size_t keep_tree_below = 64 * 1024;

struct group_version_kind {
  std::string_view group, version, kind;
};

// Views into the decoder's envelope parser and buffer, valid until its next envelope.
struct parsed_review {
  std::string_view api_version;
  std::string_view kind;
  bool has_request = false;
  bool has_uid = false;
  std::string_view uid;
  group_version_kind request_kind;
  std::string_view operation;
  std::string_view name;
  bool has_object = false;  // present and not null
  std::string_view object_json;
  // object_json's first byte when the decoder's reusable tree holds that object, built
  // while the envelope was read.
  const char* built_object = nullptr;
};

// The kind a route validates when the request names it (the others are allowed unread);
// `only` null: whichever admitted kind the request names.
const core::admitted_kind* handles(const core::admitted_kind* only, const group_version_kind& gvk) {
  const core::admitted_kind* k = core::find_admitted_kind(gvk.group, gvk.kind);
  return only == nullptr || k == only ? k : nullptr;
}
bool validates_operation(std::string_view op) { return op == "CREATE" || op == "UPDATE"; }

outcome refuse(failure f, std::string message) {
  outcome o;
  o.result = verdict::errored;
  o.error = f;
  o.kind = "other";
  o.message = std::move(message);
  return o;
}

outcome bad_request(std::string message) {
  return refuse(failure::bad_request, std::move(message));
}

std::string_view json_error_text(simdjson::error_code e) { return simdjson::error_message(e); }

// Reads a string field; anything else is a malformed request.
bool read_string(ondemand::value v, std::string_view& out) {
  return v.get_string().get(out) == simdjson::SUCCESS;
}

// Parses the envelope with the decoder's envelope parser (core::iterate_envelope), so that
// request.object can then be decoded with its main one while these views stay valid. Returns
// an error message, empty on success.
//
// With `build` set, an object that will be validated (the apiserver sends request.kind and
// request.operation before request.object) is built into the decoder's reusable tree from
// this same parse, instead of a second parse of its text. Only a clean build counts: when it
// fails, `rebuild` is set and the caller reads the envelope again without building, so that
// every verdict on a malformed object comes from decode_json as before.
std::string parse_envelope(core::json_decoder& decoder, std::string_view body, parsed_review& r,
                           const core::admitted_kind* rt, bool build, bool& rebuild) {
  ondemand::document doc;
  std::string_view copy;  // the body's padded copy, into which every view below points
  if (auto e = core::iterate_envelope(decoder, body, doc, copy)) {
    return std::string("request body is not JSON: ") + std::string(json_error_text(e));
  }
  const char* const body_end = copy.data() + copy.size();
  ondemand::object top;
  if (doc.get_object().get(top) != simdjson::SUCCESS) {
    return "request body is not a JSON object";
  }
  for (auto field_result : top) {
    ondemand::field field;
    if (auto e = std::move(field_result).get(field)) {
      return std::string("request body is not JSON: ") + std::string(json_error_text(e));
    }
    std::string_view key;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS) return "request body is not JSON";
    if (key == "apiVersion") {
      if (!read_string(field.value(), r.api_version)) return "apiVersion must be a string";
    } else if (key == "kind") {
      if (!read_string(field.value(), r.kind)) return "kind must be a string";
    } else if (key == "request") {
      ondemand::object req;
      ondemand::value v = field.value();
      bool is_null = false;
      if (v.is_null().get(is_null) == simdjson::SUCCESS && is_null) continue;
      if (v.get_object().get(req) != simdjson::SUCCESS) return "request must be an object";
      r.has_request = true;
      for (auto rf_result : req) {
        ondemand::field rf;
        if (auto e = std::move(rf_result).get(rf)) {
          return std::string("request body is not JSON: ") + std::string(json_error_text(e));
        }
        std::string_view rkey;
        if (rf.unescaped_key().get(rkey) != simdjson::SUCCESS) return "request body is not JSON";
        if (rkey == "uid") {
          if (!read_string(rf.value(), r.uid)) return "request.uid must be a string";
          r.has_uid = true;
        } else if (rkey == "operation") {
          if (!read_string(rf.value(), r.operation)) return "request.operation must be a string";
        } else if (rkey == "name") {
          if (!read_string(rf.value(), r.name)) return "request.name must be a string";
        } else if (rkey == "kind") {
          ondemand::object gvk;
          if (rf.value().get_object().get(gvk) != simdjson::SUCCESS) {
            return "request.kind must be an object";
          }
          for (auto kf_result : gvk) {
            ondemand::field kf;
            if (std::move(kf_result).get(kf) != simdjson::SUCCESS)
              return "request body is not JSON";
            std::string_view kkey;
            if (kf.unescaped_key().get(kkey) != simdjson::SUCCESS)
              return "request body is not JSON";
            std::string_view* dst = kkey == "group"     ? &r.request_kind.group
                                    : kkey == "version" ? &r.request_kind.version
                                    : kkey == "kind"    ? &r.request_kind.kind
                                                        : nullptr;
            if (dst && !read_string(kf.value(), *dst)) return "request.kind fields must be strings";
          }
        } else if (rkey == "object") {
          ondemand::value ov = rf.value();
          bool null_object = false;
          if (ov.is_null().get(null_object) == simdjson::SUCCESS && null_object) continue;
          const char* obj_start = ov.raw_json_token().data();
          ondemand::object obj;
          if (ov.get_object().get(obj) != simdjson::SUCCESS)
            return "request.object must be an object";
          r.built_object = nullptr;
          if (build && handles(rt, r.request_kind) != nullptr && validates_operation(r.operation)) {
            // Built as it is read; its text (raw_json()'s span: to the next token) is known
            // only afterwards, and checked then. Any failure reads the envelope again.
            const char* start = obj_start;
            const char* end = nullptr;
            const std::string_view rest(start, static_cast<std::size_t>(body_end - start));
            if (!core::build_object_reusing(decoder, obj, rest, core::decode_limits{}) ||
                doc.current_location().get(end) != simdjson::SUCCESS || end < start) {
              rebuild = true;
              return {};
            }
            r.object_json = std::string_view(start, static_cast<std::size_t>(end - start));
            r.has_object = true;
            if (!core::json_text_acceptable(r.object_json, core::decode_limits{})) {
              rebuild = true;
              return {};
            }
            r.built_object = start;
            continue;
          }
          std::string_view raw;
          if (auto e = obj.raw_json().get(raw)) {
            return std::string("request.object is not JSON: ") + std::string(json_error_text(e));
          }
          r.object_json = raw;
          r.has_object = true;
        }
      }
    }
  }
  return {};
}

// The review on the route of `rt`, or (rt null) on the route of the kind the request names.
outcome review_any(const core::admitted_kind* rt, std::string_view body, const request_meta& meta,
                   const options& opts, core::json_decoder& decoder) {
  if (meta.content_type && !is_json_content_type(*meta.content_type)) {
    return refuse(failure::unsupported_media_type, "Content-Type must be application/json, got \"" +
                                                       sanitize_warning(*meta.content_type) + "\"");
  }
  if (body.size() > opts.max_body_bytes) {
    return refuse(failure::too_large, "request body is " + std::to_string(body.size()) +
                                          " bytes; the limit is " +
                                          std::to_string(opts.max_body_bytes));
  }
  if (body.empty()) return bad_request("request body is empty; expected an AdmissionReview");

  parsed_review r;
  // The reusable tree keeps the capacity of the largest object it held: after a large
  // body it is dropped when the review is done (r.name may view into it until then),
  // whatever the outcome, so that no thread keeps a large tree for the rest of its life.
  struct drop_large_tree {
    core::json_decoder& decoder;
    bool large;
    ~drop_large_tree() {
      if (large) core::release_reused_tree(decoder);
    }
  } const drop{decoder, body.size() > keep_tree_below};
  bool rebuild = false;
  std::string err = parse_envelope(decoder, body, r, rt, true, rebuild);
  if (rebuild) {
    r = parsed_review{};
    err = parse_envelope(decoder, body, r, rt, false, rebuild);
  }
  if (!err.empty()) return bad_request(err);
  if (r.kind != "AdmissionReview") {
    return bad_request("kind must be AdmissionReview, got \"" + sanitize_warning(r.kind) + "\"");
  }
  if (r.api_version != "admission.k8s.io/v1" && r.api_version != "admission.k8s.io/v1beta1") {
    return bad_request(
        "apiVersion must be admission.k8s.io/v1 or admission.k8s.io/v1beta1, got \"" +
        sanitize_warning(r.api_version) + "\"");
  }
  if (!r.has_request) return bad_request("AdmissionReview has no request");
  if (!r.has_uid || r.uid.empty()) return bad_request("request.uid is missing");

  outcome o;
  o.uid = r.uid;
  const core::admitted_kind* const handled = handles(rt, r.request_kind);
  o.kind = handled != nullptr ? r.request_kind.kind : "other";

  core::error_list errors;
  std::vector<std::string> warnings;
  core::decode_result decoded;           // outlives the response: r.name may view into it
  const core::doc_node* root = nullptr;  // the decoder's reused tree or decoded.root
  const bool validates = handled != nullptr && validates_operation(r.operation);
  if (validates) {
    if (!r.has_object)
      return bad_request("request.object is required for " + std::string(r.operation));
    if (meta.deadline && std::chrono::steady_clock::now() >= *meta.deadline) {
      auto t = refuse(failure::timeout, "the request's timeout expired before validation started");
      t.uid = r.uid;
      t.kind = o.kind;
      return t;
    }
    if (r.built_object != nullptr && r.built_object == r.object_json.data()) {
      root = &core::reused_tree(decoder);
    } else if (core::decode_object_reusing(decoder, r.object_json, core::decode_limits{})) {
      root = &core::reused_tree(decoder);
    } else {
      // Whatever the reusing decoders refused gets decode_json's exact verdict.
      decoded = core::decode_json(decoder, r.object_json);
      if (decoded.ok())
        root = &decoded.root;
      else
        errors = std::move(decoded.errors);
    }
    if (root != nullptr) {
      handled->validate(*root, opts.validation, errors, warnings);
      // A TopologySource's ownership warning (admission.ownershipCheck); a denied object never
      // exists, so it conflicts with nothing.
      if (handled->route == route::topology_sources && errors.empty() &&
          opts.ownership != nullptr) {
        if (const auto snap = opts.ownership->current()) {
          for (auto& w : ownership_warnings(*snap, *root)) warnings.push_back(std::move(w));
        }
      }
      if (r.name.empty()) {
        // CREATE with generateName: the apiserver leaves request.name empty.
        if (const auto* md = root->find("metadata")) {
          if (const auto* n = md->find("name"); n && n->is_scalar()) r.name = n->text;
        }
      }
    }
  }

  std::string& out = o.body;
  // A denial holds each error's texts twice (in the message and in its cause) and its
  // field three times: reserved at once, as growing a long body copies it.
  std::size_t expected = 256;
  for (const auto& e : errors)
    expected +=
        160 + 2 * (e.detail.size() + e.bad_value.size() + e.rule.size()) + 3 * e.path.size();
  for (const auto& w : warnings) expected += 4 + w.size();
  out.reserve(expected);
  out += R"({"apiVersion":)";
  core::append_json_string(out, r.api_version);
  out += R"(,"kind":"AdmissionReview","response":{"uid":)";
  core::append_json_string(out, r.uid);
  out += R"(,"allowed":)";
  out += errors.empty() ? "true" : "false";
  if (!errors.empty()) {
    // apierrors.NewInvalid: what the apiserver turns into kubectl's
    // `admission webhook "..." denied the request: <message>`.
    out += R"(,"status":)";
    core::append_invalid_status(out, r.request_kind.group, r.request_kind.kind, r.name, errors,
                                false);
  }
  std::size_t kept = 0;
  for (const auto& w : warnings) {
    std::string s = sanitize_warning(w);
    if (s.empty()) continue;
    out += kept == 0 ? R"(,"warnings":[)" : ",";
    core::append_json_string(out, s);
    ++kept;
  }
  if (kept) out += ']';
  out += "}}";
  o.warning_count = kept;
  o.result = errors.empty() ? verdict::allowed : verdict::denied;
  o.errors = std::move(errors);
  return o;
}

// One decoder per thread, as the webhook routes keep, for the bodies a review usually has; a
// large body gets a decoder of its own, so that no thread keeps its buffers.
outcome review_any(const core::admitted_kind* rt, std::string_view body, const request_meta& meta,
                   const options& opts) {
  if (body.size() <= keep_tree_below) {
    thread_local core::json_decoder decoder;
    return review_any(rt, body, meta, opts, decoder);
  }
  core::json_decoder decoder;
  return review_any(rt, body, meta, opts, decoder);
}

}  // namespace

outcome review(route rt, std::string_view body, const request_meta& meta, const options& opts) {
  return review_any(&core::admitted(rt), body, meta, opts);
}

outcome review(route rt, std::string_view body, const request_meta& meta, const options& opts,
               core::json_decoder& decoder) {
  return review_any(&core::admitted(rt), body, meta, opts, decoder);
}

outcome review_on_its_route(std::string_view body, const request_meta& meta, const options& opts) {
  return review_any(nullptr, body, meta, opts);
}

}  // namespace topogate::admission
