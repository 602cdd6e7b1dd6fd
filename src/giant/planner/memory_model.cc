#include "giant/planner/memory_model.h"

#include <algorithm>

#include "giant/base/error.h"
#include "giant/planner/partition.h"

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

double in_flight_micro_batches(const Layout& l, int64_t m, int stage) {
  if (l.pp == 1) return 1;
  const double p = l.pp;
  switch (l.schedule) {
    case Schedule::gpipe: return static_cast<double>(m);
    case Schedule::one_f_one_b: return std::min<double>(p - stage, static_cast<double>(m));
    case Schedule::interleaved: return std::max(1.0, p * (1 + (p - 1) / (p * l.virtual_stages)) - stage);
  }
  return p;
}

namespace {

// GPT's layer list as the trainer cuts it: the embedding, the blocks, the
// final norm and the (tied, parameter-free) head (layer_list_length layers).
std::vector<PartitionLayer> gpt_partition_layers(const ModelSpec& m) {
  std::vector<PartitionLayer> layers{{"GptEmbedding", static_cast<int64_t>(embedding_parameters(m))}};
  for (int64_t i = 0; i < m.layers; ++i) layers.push_back({"GptBlock", static_cast<int64_t>(layer_parameters(m))});
  layers.push_back({"GptFinalNorm", 2 * m.hidden});
  layers.push_back({"GptHead", 0});
  return layers;
}

}  // namespace

int64_t layer_list_length(const ModelSpec& m) { return m.layers + 3; }

bool stages_can_cut(const ModelSpec& m, int pp, int v) {
  if (pp < 1 || v < 1) return false;
  if (v == 1) return pp <= layer_list_length(m);
  return m.layers % (int64_t{pp} * v) == 0;
}

int64_t stage_blocks(const ModelSpec& m, int pp, int stage) {
  if (m.layers % pp == 0) return m.layers / pp;
  if (pp > m.layers) {  // some stages hold no block: where the trainer's default partition puts them
    const StageBounds bounds = partition_layers(gpt_partition_layers(m), pp, "parameters");
    const auto first_block = size_t{1}, end_block = static_cast<size_t>(m.layers) + 1;
    const size_t begin = std::max(bounds.at(static_cast<size_t>(stage)), first_block);
    const size_t end = std::min(bounds.at(static_cast<size_t>(stage) + 1), end_block);
    return end > begin ? static_cast<int64_t>(end - begin) : 0;
  }
  if (pp > 2 && (m.layers + 2) % pp == 0) {
    const int64_t units = (m.layers + 2) / pp;  // the embedding and the head take one unit each
    return stage == 0 || stage == pp - 1 ? units - 1 : units;
  }
  return m.layers / pp + (stage < m.layers % pp ? 1 : 0);  // the trainer's uniform partition
}

double zero3_gathered_bytes(const ModelSpec& m, const Layout& l, const RunPrecision& precision,
                            const ZeroEngine& engine, int64_t blocks) {
  if (l.zero != 3 || l.dp == 1) return 0;
  const double layer_bytes = layer_parameters(m) / l.tp * precision.compute_bytes();
  if (l.pp > 1 && !engine.zero3_regather) return blocks * layer_bytes;
  if (engine.deepspeed) {  // what it keeps live, in elements, and its prefetch window
    const double layer_elements = layer_parameters(m) / l.tp;
    return (std::min(layer_elements, engine.deepspeed_max_live_elements) +
            std::min(layer_elements, engine.deepspeed_prefetch_elements)) *
           precision.compute_bytes();
  }
  return std::min<double>(blocks, 1 + engine.zero3_prefetch) * layer_bytes;
}

namespace {

// One pipeline stage's needs (stage 0 is the first).
MemoryBreakdown stage_memory(const ModelSpec& m, const Layout& l, const RunPrecision& precision,
                             const ZeroEngine& engine, int stage) {
  const int64_t blocks = stage_blocks(m, l.pp, stage);
  const double b = l.micro_batch, t = l.tp;
  const double word_embedding = static_cast<double>(m.vocab) * m.hidden / t;
  const double position_embedding = static_cast<double>(m.seq_len) * m.hidden;
  const double element = precision.compute_bytes();
  const bool first = stage == 0, last = stage == l.pp - 1;

  MemoryBreakdown mem;
  mem.parameters = blocks * layer_parameters(m) / t + (first || last ? word_embedding : 0) +
                   (first ? position_embedding : 0);
  mem.model_states = mem.parameters * model_state_bytes_per_parameter(l.zero, l.dp, precision);
  const double kept = layer_activation_bytes(m, b, l.tp, l.sequence_parallel, l.recompute, element);
  // With full recomputation one layer at a time is rebuilt with all its activations.
  const double working = l.recompute == Recompute::full
                             ? layer_activation_bytes(m, b, l.tp, l.sequence_parallel, Recompute::none, element)
                             : 0;
  const double in_flight = in_flight_micro_batches(l, l.micro_batches(m.global_batch), stage);
  mem.activations = in_flight * blocks * kept + working;
  // Logits in the compute dtype plus the fp32 softmax the loss keeps, vocabulary split by tp.
  if (last) mem.logits = static_cast<double>(m.seq_len) * b * m.vocab / t * (element + 4);

  const double gradient = precision.gradient_bytes();
  if (l.dp > 1 && l.zero == 2) mem.comm_buffers = 2 * engine.bucket_bytes;
  if (l.dp > 1 && l.zero == 3) {
    mem.comm_buffers = zero3_gathered_bytes(m, l, precision, engine, blocks);
    // A layer's full gradient lives until its reduce-scatter; without
    // regathering under a pipeline the stage's gradients accumulate in full.
    const double layer_gradient =
        std::min(layer_parameters(m) / t, engine.deepspeed ? engine.deepspeed_reduce_bucket_elements : 1e300) *
        gradient;
    mem.comm_buffers += l.pp > 1 && !engine.zero3_regather ? mem.parameters * gradient : layer_gradient;
  }
  return mem;
}

}  // namespace

MemoryBreakdown memory_per_device(const ModelSpec& m, const Layout& l, const RunPrecision& precision,
                                  const ZeroEngine& engine) {
  MemoryBreakdown most = stage_memory(m, l, precision, engine, 0);
  // The first stage holds the most micro-batches, the last the logits; with
  // uneven stages the second holds more blocks than the first.
  for (int stage : {1, l.pp - 1}) {
    if (stage <= 0 || stage >= l.pp) continue;
    const MemoryBreakdown mem = stage_memory(m, l, precision, engine, stage);
    if (mem.total() > most.total()) most = mem;
  }
  return most;
}

}  // namespace giant::planner
