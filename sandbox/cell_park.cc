// Parked cells (cell.h, Cell::CreateParked): Unpark, the claim that finishes one over a
// session's snapshot layers, and the namespace backend's parking. Cell init's half is the
// root order and the claim of sandbox/init/setup.h.
#include <memory>
#include <string>
#include <vector>

#include "sandbox/cell.h"
#include "sandbox/cell_internal.h"
#include "sandbox/init/setup.h"
#include "sandbox/state_dir.h"

namespace mcpcell::sandbox {

using cell_internal::Clock;
using cell_internal::MicrosSince;
using cell_internal::ServerSteps;

// The claim (setup.h, kClaimTag): the layers' idmapped mounts and the claimed spec go to
// cell init, which builds the root, enters its cgroup, drops capabilities, installs the
// seccomp program and sends Ready, exactly as an unparked init does after its root order.
// From the first send on, a failure leaves the cell half-made: parked_ is cleared and no
// channel is opened, so it is unusable and its owner destroys it.
Status Cell::Unpark(const std::vector<CellLayer>& layers) {
  if (!parked_ || destroyed_) return Error::Msg("cell " + spec_.id + " is not parked");
  const Clock::time_point start = Clock::now();
  auto fail = [this](const Error& e) { return e.Wrap("unpark cell " + spec_.id); };
  ServerSteps steps(timings_);
  CellSpec claimed = spec_;
  claimed.layers = layers;
  if (Status s = ValidateCellSpec(claimed); !s) return fail(s.error().Wrap("cell spec"));
  Result<std::vector<UniqueFd>> mounts = Impl::OpenLayerMounts(*this, layers);
  if (!mounts) return fail(mounts.error().Wrap("layers"));
  Result<UniqueFd> memfd = Impl::SpecMemfd(claimed);
  if (!memfd) return fail(memfd.error());
  steps.Mark("claim_layers");
  parked_ = false;
  Status sent = Impl::SendOrder(claim_fd_.get(), kClaimTag, memfd->get(), {});
  if (sent) sent = Impl::SendOrder(claim_fd_.get(), kLayersTag, -1, *mounts);
  claim_fd_.Reset();
  if (!sent) return fail(sent.error());
  spec_ = std::move(claimed);  // WaitReady checks the egress listener against it
  UniqueFd control = std::move(parked_control_);
  if (Status s = Impl::WaitReady(*this, ready_timeout_, control.get()); !s) return fail(s.error());
  steps.Mark("claim_ready");
  Impl::OpenChannel(*this, std::move(control));
  timings_.unpark_us = MicrosSince(start);
  return Ok();
}

Result<std::unique_ptr<CellInstance>> NamespaceBackend::CreateParked(const CellSpec& spec) const {
  Result<std::unique_ptr<Cell>> cell = Cell::CreateParked(spec, options_);
  if (!cell) return cell.error();
  return std::unique_ptr<CellInstance>(std::move(cell).value());
}

bool NamespaceBackend::ParksCells() const { return CellsRunAsOtherUids(); }

}  // namespace mcpcell::sandbox
