#include "model/scheduler_contract.h"

namespace mc::model {

std::string_view to_string(CacheRegistration r) {
  return r == CacheRegistration::at_schedule ? "at_schedule" : "after_commit";
}

std::optional<CacheRegistration> find_cache_registration(std::string_view name) {
  if (name == "after_commit") return CacheRegistration::after_commit;
  if (name == "at_schedule") return CacheRegistration::at_schedule;
  return std::nullopt;
}

} // namespace mc::model
