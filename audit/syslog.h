// The live feed of the trail to syslog, for a SIEM: each record as one RFC 5424 message
//   <PRI>1 TIMESTAMP HOST mcpcell - TYPE - JSON
// (facility log audit (13) by default; severity notice for refusals and recoveries, info
// otherwise), sent as one datagram over a Unix socket ("unix:/dev/log") or octet-counted
// over TCP ("tcp:127.0.0.1:6514", RFC 6587: "LEN SP MSG"). A send that fails is counted and
// the TCP connection is made again on the next record; the trail never waits on a dead
// collector for long (a 1 s send timeout). Threading: Send may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "audit/trail.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace mcpcell::audit {

inline constexpr int kFacilityLogAudit = 13;

// The RFC 5424 message for a record (no framing).
std::string FormatSyslog(const nlohmann::json& record, const std::string& hostname,
                         int facility = kFacilityLogAudit);

class SyslogSink {
 public:
  // target: "unix:PATH" (datagram) or "tcp:HOST:PORT" (numeric or resolvable host). The
  // first connection is made here; an error names the target.
  static Result<std::unique_ptr<SyslogSink>> Connect(const std::string& target,
                                                     int facility = kFacilityLogAudit);
  SyslogSink(const SyslogSink&) = delete;
  SyslogSink& operator=(const SyslogSink&) = delete;

  Status Send(const nlohmann::json& record);
  // A RecordSink (trail.h) that sends through this sink; it must outlive the trail's use.
  RecordSink AsRecordSink();
  uint64_t failed_sends() const;

 private:
  SyslogSink(bool tcp, std::string address, int facility);
  Status ConnectLocked();

  const bool tcp_;
  const std::string address_;  // the path, or "host:port"
  const int facility_;
  std::string hostname_;
  mutable std::mutex mu_;
  UniqueFd fd_;
  uint64_t failed_ = 0;
};

}  // namespace mcpcell::audit
