// See mcp_http_session.h.
#include "bench/http_load/mcp_http_session.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <stdexcept>

namespace http_load {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::awaitable;
using asio::use_awaitable;
using Json = nlohmann::json;

struct McpSession::Connection {
  explicit Connection(asio::io_context& io) : stream(io) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
};

Endpoint ResolveUrl(asio::io_context& io, const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    throw std::invalid_argument("URL " + url + ": only http:// is supported");
  }
  const size_t slash = url.find('/', scheme.size());
  Endpoint ep;
  ep.host_header = url.substr(
      scheme.size(), slash == std::string::npos ? std::string::npos : slash - scheme.size());
  ep.target = slash == std::string::npos ? "/" : url.substr(slash);
  const size_t colon = ep.host_header.rfind(':');
  if (ep.host_header.empty() || colon == std::string::npos || colon + 1 == ep.host_header.size()) {
    throw std::invalid_argument("URL " + url + ": host:port expected after http://");
  }
  std::string host = ep.host_header.substr(0, colon);
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  ep.addresses = asio::ip::tcp::resolver(io).resolve(host, ep.host_header.substr(colon + 1), ec);
  if (ec)
    throw std::invalid_argument("URL " + url + ": cannot resolve " + host + ": " + ec.message());
  return ep;
}

McpSession::McpSession(asio::io_context& io, const Endpoint& endpoint,
                       std::chrono::milliseconds timeout)
    : io_(io), endpoint_(endpoint), timeout_(timeout) {}

McpSession::~McpSession() = default;

namespace {

// The JSON-RPC message with this id in an SSE body: events are separated by a blank line,
// an event's data is its "data:" lines joined by newlines.
Json FindInSse(const std::string& body, const std::string& id_key) {
  std::string data;
  size_t pos = 0;
  auto flush = [&]() -> Json {
    Json msg = data.empty() ? Json() : Json::parse(data, nullptr, false);
    data.clear();
    if (msg.is_object() && msg.contains("id") && msg["id"].dump() == id_key) return msg;
    return Json();
  };
  while (pos <= body.size()) {
    size_t end = body.find('\n', pos);
    if (end == std::string::npos) end = body.size();
    std::string line = body.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    pos = end + 1;
    if (line.empty()) {
      if (Json msg = flush(); !msg.is_null()) return msg;
    } else if (line.rfind("data:", 0) == 0) {
      if (!data.empty()) data += '\n';
      data += line.substr(line.size() > 5 && line[5] == ' ' ? 6 : 5);
    }
  }
  return flush();
}

}  // namespace

awaitable<McpSession::Answer> McpSession::Attempt(Connection& c, bool reused,
                                                  const std::string& body,
                                                  const std::string& id_key, bool* retry,
                                                  bool* keep_alive) {
  boost::system::error_code ec;
  http::request<http::string_body> req{http::verb::post, endpoint_.target, 11};
  req.set(http::field::host, endpoint_.host_header);
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "application/json, text/event-stream");
  if (!session_id_.empty()) req.set("Mcp-Session-Id", session_id_);
  if (!protocol_version_.empty()) req.set("MCP-Protocol-Version", protocol_version_);
  req.keep_alive(true);
  req.body() = body;
  req.prepare_payload();
  c.stream.expires_after(timeout_);
  co_await http::async_write(c.stream, req, asio::redirect_error(use_awaitable, ec));
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  if (!ec)
    co_await http::async_read(c.stream, c.buffer, parser, asio::redirect_error(use_awaitable, ec));
  if (ec) {
    // The server closes idle keep-alive connections; a request that found one closed
    // before any answer came is not the server's failure.
    *retry = reused && !parser.got_some() && ec != beast::error::timeout;
    co_return Answer{ec == beast::error::timeout ? "timeout" : "io: " + ec.message(), Json()};
  }
  http::response<http::string_body> res = parser.release();
  *keep_alive = res.keep_alive();
  if (res.result_int() == 202) co_return Answer{"", Json()};
  if (res.result_int() != 200) co_return Answer{"http " + std::to_string(res.result_int()), Json()};
  if (id_key.empty()) co_return Answer{"", Json()};
  const std::string ctype(res[http::field::content_type]);
  if (auto sid = res.find("Mcp-Session-Id"); sid != res.end())
    session_id_ = std::string(sid->value());
  Json msg = ctype.rfind("text/event-stream", 0) == 0 ? FindInSse(res.body(), id_key)
                                                      : Json::parse(res.body(), nullptr, false);
  if (!msg.is_object() || !msg.contains("id") || msg["id"].dump() != id_key) {
    co_return Answer{"no answer to the request in the response", Json()};
  }
  co_return Answer{"", std::move(msg)};
}

awaitable<McpSession::Answer> McpSession::Post(const std::string& body, const std::string& id_key) {
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<Connection> c;
    const bool reused = !idle_.empty();
    if (reused) {
      c = std::move(idle_.back());
      idle_.pop_back();
    } else {
      c = std::make_unique<Connection>(io_);
      boost::system::error_code ec;
      c->stream.expires_after(timeout_);
      co_await c->stream.async_connect(endpoint_.addresses,
                                       asio::redirect_error(use_awaitable, ec));
      if (ec)
        co_return Answer{ec == beast::error::timeout ? "timeout" : "connect: " + ec.message(),
                         Json()};
    }
    bool retry = false, keep_alive = false;
    Answer a = co_await Attempt(*c, reused, body, id_key, &retry, &keep_alive);
    if (retry && attempt == 0) continue;
    if (a.error.empty() && keep_alive) idle_.push_back(std::move(c));
    co_return a;
  }
}

awaitable<std::string> McpSession::Open() {
  const int64_t id = next_id_++;
  Json init = {{"jsonrpc", "2.0"},
               {"id", id},
               {"method", "initialize"},
               {"params",
                {{"protocolVersion", "2025-06-18"},
                 {"capabilities", Json::object()},
                 {"clientInfo", {{"name", "http_load"}, {"version", "1"}}}}}};
  Answer a = co_await Post(init.dump(), Json(id).dump());
  if (!a.error.empty()) co_return "initialize: " + a.error;
  if (a.message.contains("error")) {
    co_return "initialize: jsonrpc " + a.message["error"].value("code", Json(0)).dump();
  }
  if (session_id_.empty()) co_return "initialize: no Mcp-Session-Id";
  protocol_version_ = a.message["result"].value("protocolVersion", "");
  Json note = {{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}};
  a = co_await Post(note.dump(), "");
  if (!a.error.empty()) co_return "initialized: " + a.error;
  co_return "";
}

awaitable<std::string> McpSession::RunCommand(const std::string& command) {
  const int64_t id = next_id_++;
  Json call = {{"jsonrpc", "2.0"},
               {"id", id},
               {"method", "tools/call"},
               {"params", {{"name", "run_command"}, {"arguments", {{"command", command}}}}}};
  Answer a = co_await Post(call.dump(), Json(id).dump());
  if (!a.error.empty()) co_return a.error;
  if (a.message.contains("error")) {
    co_return "jsonrpc " + a.message["error"].value("code", Json(0)).dump();
  }
  const Json& result = a.message["result"];
  if (result.value("isError", false)) co_return "tool isError";
  co_return "";
}

awaitable<void> McpSession::Close() {
  if (session_id_.empty()) co_return;
  auto c = std::make_unique<Connection>(io_);
  boost::system::error_code ec;
  c->stream.expires_after(timeout_);
  co_await c->stream.async_connect(endpoint_.addresses, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return;
  http::request<http::empty_body> req{http::verb::delete_, endpoint_.target, 11};
  req.set(http::field::host, endpoint_.host_header);
  req.set("Mcp-Session-Id", session_id_);
  if (!protocol_version_.empty()) req.set("MCP-Protocol-Version", protocol_version_);
  co_await http::async_write(c->stream, req, asio::redirect_error(use_awaitable, ec));
  http::response<http::string_body> res;
  if (!ec)
    co_await http::async_read(c->stream, c->buffer, res, asio::redirect_error(use_awaitable, ec));
  session_id_.clear();
  idle_.clear();
}

}  // namespace http_load
