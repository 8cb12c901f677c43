// describe_tensor / describe_row (describe.h): the names every oracle InputError uses.
#include "oracle/describe.h"

#include "model/errors.h"

#include <fmt/format.h>

namespace mc::oracle {

std::string describe_tensor(const model::Layout& layout, std::int32_t tensor) {
  MC_ASSERT(tensor >= 0 && static_cast<std::size_t>(tensor) < layout.tensors.size());
  const model::StateTensor& t = layout.tensors[static_cast<std::size_t>(tensor)];
  const model::GroupSpec& group = layout.spec.groups[static_cast<std::size_t>(t.group)];
  return fmt::format("tensor {} (group {} '{}', layer {}, state {} '{}')", tensor, t.group,
                     group.name, t.layer, t.state, t.shape.name);
}

std::string describe_row(std::int32_t batch_row, std::int32_t slot) {
  return fmt::format("request row {} (slot {})", batch_row, slot);
}

} // namespace mc::oracle
