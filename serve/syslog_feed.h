// The trail's live feed to a syslog collector (docs/audit.md "Syslog feed"), from the
// `[audit] syslog` setting: "unix:/absolute/path" (datagrams, e.g. /dev/log) or
// "tcp:host:port". The spec is checked here so a bad setting refuses the start with a
// message naming it; the sending is audit::SyslogSink's.
#pragma once

#include <memory>
#include <string>

#include "audit/syslog.h"
#include "base/status.h"

namespace mcpcell::serve {

// Connects the feed. Add it to the trail with trail->AddSink(feed->AsRecordSink()); the
// returned sink must outlive the trail.
Result<std::unique_ptr<audit::SyslogSink>> MakeSyslogFeed(const std::string& spec);

}  // namespace mcpcell::serve
