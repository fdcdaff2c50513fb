#pragma once
// A Beast body that writes bytes it does not own: the owner (a published revision, or a
// string made for this response) is held by a shared_ptr for as long as the response
// lives. Snapshot bodies are rendered once per revision and never copied per request: a
// revision kept in pieces (a Node change's rendering shares the one before it) is written
// from its pieces as they are.

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "core/shared_text.hpp"

namespace topogate::server {

struct shared_body {
  struct value_type {
    std::shared_ptr<const void> owner;
    // The body in one buffer; empty when the body is `pieces`.
    std::string_view data;
    // The body as the pieces of a text `owner` holds (more than one), in order.
    std::span<const core::shared_text::piece> pieces;

    value_type() = default;
    // Takes ownership of a freshly built string.
    explicit value_type(std::string s) {
      auto p = std::make_shared<const std::string>(std::move(s));
      data = *p;
      owner = std::move(p);
    }
    // Borrows `bytes`, which `keep_alive` owns.
    value_type(std::shared_ptr<const void> keep_alive, std::string_view bytes)
        : owner(std::move(keep_alive)), data(bytes) {}
    // Borrows `text`, which `keep_alive` owns: its one buffer, or its pieces.
    value_type(std::shared_ptr<const void> keep_alive, const core::shared_text& text)
        : owner(std::move(keep_alive)) {
      if (const std::string* whole = text.whole()) {
        data = *whole;
      } else if (text.pieces().size() == 1) {
        data = text.pieces().front().view();
      } else {
        pieces = text.pieces();
      }
    }

    [[nodiscard]] std::size_t size() const noexcept {
      std::size_t n = data.size();
      for (const auto& p : pieces) n += p.size;
      return n;
    }
    // The body's bytes in one string (for a test or a log, never the served path).
    [[nodiscard]] std::string str() const {
      std::string out(data);
      for (const auto& p : pieces) out += p.view();
      return out;
    }
  };

  static std::uint64_t size(const value_type& v) noexcept { return v.size(); }

  // Beast's writer (the serializer, as the fuzzers and tests use it): the buffer, or each
  // piece in turn.
  class writer {
   public:
    using const_buffers_type = boost::asio::const_buffer;

    template <bool is_request, class Fields>
    writer(const boost::beast::http::header<is_request, Fields>&, const value_type& b) : body_(b) {}

    void init(boost::beast::error_code& ec) { ec = {}; }

    boost::optional<std::pair<const_buffers_type, bool>> get(boost::beast::error_code& ec) {
      ec = {};
      if (body_.pieces.empty()) {
        if (next_ > 0) return boost::none;
        next_ = 1;
        return {{const_buffers_type(body_.data.data(), body_.data.size()), false}};
      }
      if (next_ >= body_.pieces.size()) return boost::none;
      const std::string_view v = body_.pieces[next_++].view();
      return {{const_buffers_type(v.data(), v.size()), next_ < body_.pieces.size()}};
    }

   private:
    const value_type& body_;
    std::size_t next_ = 0;
  };
};

}  // namespace topogate::server
