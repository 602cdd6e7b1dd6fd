#include "giant/planner/model_layout.h"

#include <sstream>

#include "giant/planner/memory_model.h"

namespace giant::planner {

std::string why_invalid(const Layout& l, const ModelSpec& m, int devices) {
  const int dp = l.dp, tp = l.tp, pp = l.pp, micro_batch = l.micro_batch, virtual_stages = l.virtual_stages;
  const int zero = l.zero;
  std::ostringstream why;
  if (dp < 1 || tp < 1 || pp < 1 || micro_batch < 1) why << "every size must be at least 1";
  else if (devices > 0 && dp * tp * pp != devices)
    why << "tp x pp x dp = " << dp * tp * pp << " but the cluster has " << devices << " devices";
  else if (m.heads % tp != 0) why << "tp=" << tp << " does not divide heads=" << m.heads;
  else if (m.ffn_size() % tp != 0) why << "tp=" << tp << " does not divide ffn=" << m.ffn_size();
  else if (!stages_can_cut(m, pp, virtual_stages)) {
    if (virtual_stages == 1)
      why << "pp=" << pp << " is more than the " << layer_list_length(m) << " layers the model is cut from (its " << m.layers
          << " blocks, embedding, final norm and head)";
    else why << "pp x v = " << pp * virtual_stages << " does not divide layers=" << m.layers
             << " (interleaved chunks are even)";
  }
  else if (m.global_batch % (int64_t{dp} * micro_batch) != 0)
    why << "dp x mb = " << dp * micro_batch << " does not divide global_batch=" << m.global_batch;
  else if (zero < 0 || zero > kMaxZeroStage) why << "zero must be 0..3";
  else if (pp > 1 && zero == 2) why << "ZeRO-2 shards gradients a pipeline accumulates over micro-batches";
  else if (ccl::low_rank_of(l.grad_wire) > 0 && zero >= 2)
    why << ccl::grad_wire_name(l.grad_wire) << " needs whole gradients (ZeRO 0-1)";
  else if (l.sequence_parallel && tp == 1) why << "sequence parallel needs tp > 1";
  else if (l.schedule == Schedule::interleaved) {
    if (pp == 1 || virtual_stages < 2) why << "interleaved needs pp > 1 and v >= 2";
    else if (l.micro_batches(m.global_batch) % pp != 0)
      why << "interleaved needs the micro-batch count to be a multiple of pp";
  } else if (virtual_stages != 1) why << "v > 1 needs the interleaved schedule";
  return why.str();
}

}  // namespace giant::planner
