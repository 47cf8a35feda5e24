// Capability dropping with libcap, in the order the exec path needs (see caps.h).
#include "sandbox/linux/caps.h"

#include <linux/securebits.h>
#include <sys/capability.h>
#include <sys/prctl.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace mcpcell::sandbox {
namespace {

// Locked securebits for cell processes: uid 0 gets no capabilities from execve (NOROOT),
// the uid change clears permitted/effective (KEEP_CAPS and NO_SETUID_FIXUP off), and the
// ambient set can never be raised again. The *_LOCKED bits make the choice final.
constexpr unsigned kCellSecurebits =
    SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
    SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;

Status VerifyEmpty(const CapSets& s) {
  if (s.inheritable || s.permitted || s.effective || s.bounding || s.ambient) {
    char buf[160];
    std::snprintf(
        buf, sizeof buf,
        "capabilities remain: inh=%016llx prm=%016llx eff=%016llx bnd=%016llx "
        "amb=%016llx",
        static_cast<unsigned long long>(s.inheritable),
        static_cast<unsigned long long>(s.permitted), static_cast<unsigned long long>(s.effective),
        static_cast<unsigned long long>(s.bounding), static_cast<unsigned long long>(s.ambient));
    return Error::Msg(buf);
  }
  return Ok();
}

Result<CapSets> CurrentCapSets() {
  CapSets sets;
  cap_t proc = cap_get_proc();
  if (proc == nullptr) return Error::Sys("cap_get_proc()");
  const cap_value_t max = cap_max_bits();
  for (cap_value_t cap = 0; cap < max && cap < 64; ++cap) {
    const uint64_t bit = uint64_t{1} << cap;
    cap_flag_value_t v = CAP_CLEAR;
    if (cap_get_flag(proc, cap, CAP_INHERITABLE, &v) == 0 && v == CAP_SET) sets.inheritable |= bit;
    if (cap_get_flag(proc, cap, CAP_PERMITTED, &v) == 0 && v == CAP_SET) sets.permitted |= bit;
    if (cap_get_flag(proc, cap, CAP_EFFECTIVE, &v) == 0 && v == CAP_SET) sets.effective |= bit;
    const int bound = cap_get_bound(cap);
    if (bound < 0) {
      cap_free(proc);
      return Error::Sys("prctl(PR_CAPBSET_READ, " + std::to_string(cap) + ")");
    }
    if (bound == 1) sets.bounding |= bit;
    if (cap_get_ambient(cap) == 1) sets.ambient |= bit;
  }
  cap_free(proc);
  return sets;
}

}  // namespace

Status DropBoundingAndAmbientCaps() {
  // One prctl (libcap's cap_reset_ambient() first asks about every capability).
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) {
    return Error::Sys("prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)");
  }
  // cap_max_bits() is what the running kernel knows, so newer capabilities than libcap's
  // headers are dropped too.
  const cap_value_t max = cap_max_bits();
  for (cap_value_t cap = 0; cap < max; ++cap) {
    if (cap_drop_bound(cap) != 0) {
      return Error::Sys("cap_drop_bound(" + std::to_string(cap) + ")");
    }
  }
  if (cap_set_secbits(kCellSecurebits) != 0) {
    return Error::Sys("cap_set_secbits(NOROOT|NO_CAP_AMBIENT_RAISE, locked)");
  }
  return Ok();
}

// capset with permitted, effective and inheritable all clear.
static Status SetEmptyCaps() {
  cap_t empty = cap_init();  // all three sets clear
  if (empty == nullptr) return Error::Sys("cap_init()");
  const int rc = cap_set_proc(empty);
  const int saved = errno;
  cap_free(empty);
  if (rc != 0) return Error::Sys("cap_set_proc(empty)", saved);
  return Ok();
}

Status ClearAllCaps() {
  if (Status s = SetEmptyCaps(); !s.ok()) return s;
  // Read back from the kernel (capget, prctl), not /proc, which may not be mounted.
  Result<CapSets> now = CurrentCapSets();
  if (!now.ok()) return now.error().Wrap("verify capabilities cleared");
  Status empty_now = VerifyEmpty(*now);
  if (!empty_now.ok()) return empty_now.error().Wrap("verify capabilities cleared");
  return Ok();
}

Status VerifyBoundingAndAmbientEmpty() {
  Result<CapSets> now = CurrentCapSets();
  if (!now.ok()) return now.error().Wrap("verify bounding and ambient sets");
  CapSets only = *now;
  only.inheritable = only.permitted = only.effective = 0;
  Status empty = VerifyEmpty(only);
  if (!empty.ok()) return empty.error().Wrap("verify bounding and ambient sets");
  return Ok();
}

Status ClearPermittedCaps() {
  if (Status s = SetEmptyCaps(); !s.ok()) return s;
  cap_t proc = cap_get_proc();
  if (proc == nullptr) return Error::Sys("cap_get_proc()");
  cap_t none = cap_init();
  const int differ = none == nullptr ? -1 : cap_compare(proc, none);
  cap_free(proc);
  if (none != nullptr) cap_free(none);
  if (differ != 0)
    return Error::Msg("verify capabilities cleared: permitted/effective/inheritable not empty");
  return Ok();
}

Result<CapSets> ReadCapSets(int pid) {
  const std::string path =
      pid == 0 ? "/proc/thread-self/status" : "/proc/" + std::to_string(pid) + "/status";
  FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return Error::Sys("open(\"" + path + "\")");
  CapSets sets;
  int found = 0;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    struct Field {
      const char* key;
      uint64_t* out;
    } fields[] = {{"CapInh:", &sets.inheritable},
                  {"CapPrm:", &sets.permitted},
                  {"CapEff:", &sets.effective},
                  {"CapBnd:", &sets.bounding},
                  {"CapAmb:", &sets.ambient}};
    for (const Field& field : fields) {
      const size_t n = std::strlen(field.key);
      if (std::strncmp(line, field.key, n) != 0) continue;
      unsigned long long v = 0;
      if (std::sscanf(line + n, " %llx", &v) != 1) {
        std::fclose(f);
        return Error::Msg(path + ": cannot parse " + field.key);
      }
      *field.out = v;
      ++found;
    }
  }
  std::fclose(f);
  if (found != 5) return Error::Msg(path + ": missing Cap* lines");
  return sets;
}

}  // namespace mcpcell::sandbox
