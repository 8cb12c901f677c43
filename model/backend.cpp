#include "model/backend.h"

#include <array>
#include <utility>

namespace mc::model {
namespace {

constexpr std::array<std::pair<Backend, std::string_view>, 4> kNames{{
    {Backend::oracle, "oracle"},
    {Backend::host, "host"},
    {Backend::cuda, "cuda"},
    {Backend::external, "external"},
}};

} // namespace

std::string_view to_string(Backend backend) {
  for (const auto& [b, name] : kNames)
    if (b == backend) return name;
  return "?";
}

std::optional<Backend> find_backend(std::string_view name) {
  for (const auto& [b, n] : kNames)
    if (n == name) return b;
  return std::nullopt;
}

} // namespace mc::model
