#pragma once
// The plain TCP transport: a connection of the health listener (listen.healthPort), which
// serves only the health and metrics routes, without TLS.

#include <boost/asio/ip/tcp.hpp>
#include <string>

#include "server/server.hpp"

namespace topogate::server {

// Registers the connection with the listener and starts reading its first request.
void start_plain_session(boost::asio::ip::tcp::socket&& socket, server::impl& srv,
                         std::string remote);

}  // namespace topogate::server
