#pragma once
// A Beast body that writes bytes it does not own: the owner (a published revision, or a
// string made for this response) is held by a shared_ptr for as long as the response
// lives. Snapshot bodies are rendered once per revision and never copied per request.

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace topogate::server {

struct shared_body {
  struct value_type {
    std::shared_ptr<const void> owner;
    std::string_view data;

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
  };

  static std::uint64_t size(const value_type& v) noexcept { return v.data.size(); }

  class writer {
   public:
    using const_buffers_type = boost::asio::const_buffer;

    template <bool is_request, class Fields>
    writer(const boost::beast::http::header<is_request, Fields>&, const value_type& b) : body_(b) {}

    void init(boost::beast::error_code& ec) { ec = {}; }

    boost::optional<std::pair<const_buffers_type, bool>> get(boost::beast::error_code& ec) {
      ec = {};
      if (done_) return boost::none;
      done_ = true;
      return {{const_buffers_type(body_.data.data(), body_.data.size()), false}};
    }

   private:
    const value_type& body_;
    bool done_ = false;
  };
};

}  // namespace topogate::server
