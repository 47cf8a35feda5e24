// The package service (see service.h). Work in progress: the server lands next.
#include "packages/service.h"

namespace mcpcell::packages {

class PackageService::Impl {};

PackageService::PackageService(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PackageService::~PackageService() = default;

sandbox::Result<std::unique_ptr<PackageService>> PackageService::Start(ServiceOptions) {
  return sandbox::Error::Msg("package service: not implemented yet");
}
uint16_t PackageService::port() const { return 0; }
CacheStats PackageService::Stats() const { return {}; }

}  // namespace mcpcell::packages
