#include "sim/fsdp/gradient_divide.hpp"

namespace fsdpsim::fsdp {

std::int64_t gradient_predivide_factor(std::int64_t data_parallel_world) {
  std::int64_t factor = 1;
  while (data_parallel_world % factor == 0 && data_parallel_world / factor > factor) factor *= 2;
  return factor;
}

}  // namespace fsdpsim::fsdp
