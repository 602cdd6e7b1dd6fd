#include "giant/planner/memory_model.h"

#include <algorithm>

#include "giant/base/error.h"

namespace giant::planner {

double model_state_bytes_per_parameter(int zero, int dp, const RunPrecision& precision) {
  const double d = dp, w = precision.compute_bytes(), g = precision.gradient_bytes();
  const double state = (precision.keeps_master_weights() ? 4 : 0) + 8;  // fp32 master, two fp32 moments
  switch (zero) {
    case 0: return w + g + state;
    case 1: return w + g + state / d;
    case 2: return w + (g + state) / d;
    case 3: return (w + g + state) / d;
  }
  GIANT_CHECK(false, "ZeRO stage must be 0..3, got ", zero);
  return 0;
}

double layer_activation_bytes(const ModelSpec& m, double b, int tp, bool sp, Recompute recompute,
                              double element_bytes) {
  const double s = m.seq_len, h = m.hidden, a = m.heads, t = tp;
  const double sbh = s * b * h * (element_bytes / 2);
  if (recompute == Recompute::full) return 2 * sbh / (sp ? t : 1);
  const double attention = recompute == Recompute::selective ? 0 : 5 * a * s / (h * t);
  return sbh * ((sp ? 34 / t : 10 + 24 / t) + attention);
}

double in_flight_micro_batches(const Layout& l, int64_t m) {
  if (l.pp == 1) return 1;
  const double p = l.pp;
  switch (l.schedule) {
    case Schedule::gpipe: return static_cast<double>(m);
    case Schedule::one_f_one_b: return std::min<double>(p, static_cast<double>(m));
    case Schedule::interleaved: return p * (1 + (p - 1) / (p * l.virtual_stages));
  }
  return p;
}

MemoryBreakdown memory_per_device(const ModelSpec& m, const Layout& l, const RunPrecision& precision) {
  const double layers_per_stage = static_cast<double>(m.layers) / l.pp;
  const double b = l.micro_batch, t = l.tp;
  const double stage_params = layers_per_stage * layer_parameters(m) / t;
  const double word_embedding = static_cast<double>(m.vocab) * m.hidden / t;
  const double position_embedding = static_cast<double>(m.seq_len) * m.hidden;
  const double state_bytes = model_state_bytes_per_parameter(l.zero, l.dp, precision);
  const double element = precision.compute_bytes();

  const double kept = layer_activation_bytes(m, b, l.tp, l.sequence_parallel, l.recompute, element);
  // With full recomputation one layer at a time is rebuilt with all its activations.
  const double working = l.recompute == Recompute::full
                             ? layer_activation_bytes(m, b, l.tp, l.sequence_parallel, Recompute::none, element)
                             : 0;
  // ZeRO-3 gathers the (compute-copy) weights of the running layer and prefetches the next.
  const double gathered = l.zero == 3 ? 2 * layer_parameters(m) / t * element : 0;
  const double in_flight = in_flight_micro_batches(l, l.micro_batches(m));
  // Logits in the compute dtype plus the fp32 softmax the loss keeps, vocabulary split by tp.
  const double logits = static_cast<double>(m.seq_len) * b * m.vocab / t * (element + 4);

  MemoryBreakdown first;
  first.parameters = stage_params + word_embedding + position_embedding;
  first.model_states = first.parameters * state_bytes;
  first.activations = in_flight * layers_per_stage * kept + working + gathered;
  if (l.pp == 1) {
    first.logits = logits;
    return first;
  }
  MemoryBreakdown last;
  last.parameters = stage_params + word_embedding;
  last.model_states = last.parameters * state_bytes;
  last.activations = layers_per_stage * kept + working + gathered;
  last.logits = logits;
  return first.total() >= last.total() ? first : last;
}

}  // namespace giant::planner
