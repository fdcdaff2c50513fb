#pragma once
// The TLS transport: a connection of the TLS listener. OpenSSL runs over the session's own
// socket I/O through tls_channel (tls.hpp): the handshake (limits.handshakeTimeout), then
// http_session's requests, then close_notify and a bounded wait for the peer's.

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "server/server.hpp"

namespace topogate::server {

// Registers the connection with the listener and starts its handshake. `ctx` is the
// context current at accept; the connection keeps it however often it is rotated.
void start_tls_session(boost::asio::ip::tcp::socket&& socket,
                       std::shared_ptr<boost::asio::ssl::context> ctx, server::impl& srv,
                       std::string remote);

}  // namespace topogate::server
