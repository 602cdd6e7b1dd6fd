// Every cost formula against a hand-worked case.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "giant/ccl/algorithm_choice.h"
#include "giant/planner/cluster_spec.h"
#include "giant/planner/comm_model.h"
#include "giant/planner/compute_model.h"
#include "giant/planner/cost_model.h"
#include "giant/planner/memory_model.h"
#include "giant/planner/model_layout.h"
#include "giant/planner/model_spec.h"

namespace giant::planner {
namespace {

ModelSpec small_model() {
  ModelSpec m;
  m.name = "small";
  m.layers = 2;
  m.hidden = 8;
  m.heads = 2;
  m.seq_len = 4;
  m.vocab = 16;
  m.global_batch = 4;
  return m;
}

TEST(ModelFormulas, ParametersMatchNarayananFormula) {
  const ModelSpec m = small_model();
  // 12 L h^2 (1 + 13/(12h) + (V+s)/(12 L h)) = 12*2*64 + 13*8*2 + 20*8 = 1536 + 208 + 160.
  EXPECT_DOUBLE_EQ(total_parameters(m), 1904);
  EXPECT_DOUBLE_EQ(layer_parameters(m), 12 * 64 + 13 * 8);
  const ModelSpec gpt = model_preset("gpt-175b");
  const double L = gpt.layers, h = gpt.hidden, V = gpt.vocab, s = gpt.seq_len;
  EXPECT_NEAR(total_parameters(gpt), 12 * L * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * L * h)), 1);
  EXPECT_NEAR(total_parameters(gpt) / 1e9, 174.6, 0.1);
}

TEST(ModelFormulas, FlopsMatchNarayananFormula) {
  const ModelSpec m = small_model();
  // Forward of one layer, one sequence: 24 s h^2 + 4 s^2 h = 24*4*64 + 4*16*8 = 6144 + 512.
  EXPECT_DOUBLE_EQ(layer_forward_flops(m, 1), 6656);
  EXPECT_DOUBLE_EQ(logit_forward_flops(m, 1), 2 * 4 * 8 * 16);
  const double B = 4, s = 4, L = 2, h = 8, V = 16;
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(m, true), 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h)));
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(m, false), 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h)));
}

constexpr RunPrecision kHalf{Precision::fp16, Precision::fp16};    // the published runs
constexpr RunPrecision kMixed{Precision::bf16, Precision::fp32};   // giant train's bf16 default
constexpr RunPrecision kFloat{Precision::fp32, Precision::fp32};

TEST(MemoryFormulas, ModelStatesPerZeroStage) {
  // 16-bit weights and gradients, fp32 master and moments (Rajbhandari 2020).
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(0, 8, kHalf), 16);
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(1, 4, kHalf), 4 + 3);
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(2, 7, kHalf), 2 + 2);
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(3, 16, kHalf), 1);
  // bf16 compute copy 2, fp32 gradient 4, fp32 master 4 and moments 8.
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(0, 8, kMixed), 2 + 4 + 4 + 8);
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(1, 4, kMixed), 2 + 4 + 12 / 4.0);
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(2, 4, kMixed), 2 + 16 / 4.0);
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(3, 2, kMixed), 18 / 2.0);
  // fp32: the weights are the master copy; ZeRO-1 shards the moments only.
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(0, 8, kFloat), 4 + 4 + 8);
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(1, 4, kFloat), 4 + 4 + 8 / 4.0);
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(3, 4, kFloat), 16 / 4.0);
}

TEST(MemoryFormulas, ActivationsPerRecomputationChoice) {
  ModelSpec m = small_model();  // s b h = 4*1*8 = 32; 5 a s / h = 5*2*4/8 = 5
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, 1, 1, false, Recompute::none, 2), 32 * (34 + 5));
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, 1, 2, false, Recompute::none, 2), 32 * (10 + 12 + 2.5));
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, 1, 2, true, Recompute::none, 2), 32 * (17 + 2.5));
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, 1, 2, true, Recompute::selective, 2), 32 * 17);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, 2, 2, false, Recompute::full, 2), 2 * 64);
  // fp32 activations: twice the 16-bit bytes.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, 1, 1, false, Recompute::none, 4), 2 * 32 * (34 + 5));
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, 2, 2, false, Recompute::full, 4), 4 * 64);
}

TEST(MemoryFormulas, MicroBatchesInFlight) {
  Layout l;
  l.pp = 4;
  l.schedule = Schedule::one_f_one_b;
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(l, 16), 4);
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(l, 2), 2);
  l.schedule = Schedule::gpipe;
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(l, 16), 16);
  l.schedule = Schedule::interleaved;
  l.virtual_stages = 3;
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(l, 16), 4 * (1 + 3.0 / 12));
  l.pp = 1;
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(l, 16), 1);
}

TEST(MemoryFormulas, PerDeviceWithoutPipeline) {
  const ModelSpec m = small_model();
  Layout l;  // everything 1, mb 1, zero 0
  const MemoryBreakdown mem = memory_per_device(m, l, kHalf);
  EXPECT_DOUBLE_EQ(mem.parameters, 1904);
  EXPECT_DOUBLE_EQ(mem.model_states, 1904 * 16);
  EXPECT_DOUBLE_EQ(mem.activations, 2 * 32 * 39);
  EXPECT_DOUBLE_EQ(mem.logits, 4 * 16 * 6);
  // bf16 with fp32 gradients: 18 bytes a parameter, 16-bit activations.
  const MemoryBreakdown mixed = memory_per_device(m, l, kMixed);
  EXPECT_DOUBLE_EQ(mixed.model_states, 1904 * 18);
  EXPECT_DOUBLE_EQ(mixed.activations, 2 * 32 * 39);
  EXPECT_DOUBLE_EQ(mixed.logits, 4 * 16 * 6);
  // fp32: 16 bytes a parameter, activations twice, logits 4 + 4 bytes.
  const MemoryBreakdown fp32 = memory_per_device(m, l, kFloat);
  EXPECT_DOUBLE_EQ(fp32.model_states, 1904 * 16);
  EXPECT_DOUBLE_EQ(fp32.activations, 2 * 2 * 32 * 39);
  EXPECT_DOUBLE_EQ(fp32.logits, 4 * 16 * 8);
}

TEST(MemoryFormulas, GiantsZeroEngineBuffers) {
  const ModelSpec m = small_model();  // 872 parameters a layer
  Layout l;
  l.dp = 2;
  ZeroEngine engine;
  engine.bucket_bytes = 1000;
  l.zero = 1;
  EXPECT_DOUBLE_EQ(memory_per_device(m, l, kMixed, engine).comm_buffers, 0);
  // ZeRO-2: two buckets staged (one filling, one reducing).
  l.zero = 2;
  EXPECT_DOUBLE_EQ(memory_per_device(m, l, kMixed, engine).comm_buffers, 2000);
  // ZeRO-3: the running layer and one prefetched in bf16, one layer of fp32 gradient.
  l.zero = 3;
  MemoryBreakdown mem = memory_per_device(m, l, kMixed, engine);
  EXPECT_DOUBLE_EQ(mem.comm_buffers, 2 * 872 * 2 + 872 * 4);
  EXPECT_DOUBLE_EQ(mem.model_states, 1904 * 18 / 2.0);
  EXPECT_DOUBLE_EQ(mem.total(), mem.model_states + mem.activations + mem.logits + mem.comm_buffers);
  engine.zero3_prefetch = 0;
  EXPECT_DOUBLE_EQ(memory_per_device(m, l, kMixed, engine).comm_buffers, 872 * 2 + 872 * 4);
  // dp = 1: nothing is sharded, nothing gathered.
  l.dp = 1;
  EXPECT_DOUBLE_EQ(memory_per_device(m, l, kMixed, engine).comm_buffers, 0);
}

TEST(MemoryFormulas, ZeroThreeUnderAPipelineWithoutRegathering) {
  ModelSpec m = small_model();
  m.layers = 4;
  Layout l;
  l.dp = 2, l.pp = 2, l.zero = 3;
  ASSERT_TRUE(why_invalid(l, m, 4).empty()) << why_invalid(l, m, 4);
  ZeroEngine engine;
  const double regather = memory_per_device(m, l, kFloat, engine).comm_buffers;
  EXPECT_DOUBLE_EQ(regather, 2 * 872 * 4 + 872 * 4);
  // The stage's two layers stay gathered, and its gradients accumulate in full.
  engine.zero3_regather = false;
  const MemoryBreakdown kept = memory_per_device(m, l, kFloat, engine);
  EXPECT_DOUBLE_EQ(kept.comm_buffers, 2 * 872 * 4 + kept.parameters * 4);
}

TEST(MemoryFormulas, StagesWithTheEmbeddingsShare) {
  ModelSpec m = small_model();
  m.layers = 70;  // BLOOM's 70 blocks on 12 stages: 72 units of 6
  EXPECT_TRUE(stages_can_cut(m, 12, 1));
  EXPECT_FALSE(stages_can_cut(m, 12, 2));  // interleaved chunks are even
  EXPECT_TRUE(stages_can_cut(m, 11, 1));   // uneven, as the trainer cuts
  EXPECT_TRUE(stages_can_cut(m, 70, 1));
  EXPECT_TRUE(stages_can_cut(m, 73, 1));   // stages without a block, as the trainer runs them
  EXPECT_FALSE(stages_can_cut(m, 74, 1));  // a stage without a layer
  int64_t total = 0;
  for (int s = 0; s < 12; ++s) {
    EXPECT_EQ(stage_blocks(m, 12, s), s == 0 || s == 11 ? 5 : 6) << s;
    total += stage_blocks(m, 12, s);
  }
  EXPECT_EQ(total, 70);
  EXPECT_EQ(stage_blocks(m, 7, 3), 10);
  // What the trainer's uniform partition gives otherwise: the first stages one more.
  EXPECT_EQ(stage_blocks(m, 11, 3), 7);
  EXPECT_EQ(stage_blocks(m, 11, 4), 6);
  Layout l;
  l.pp = 12;
  l.dp = 1;
  m.global_batch = 12;
  EXPECT_TRUE(why_invalid(l, m, 12).empty()) << why_invalid(l, m, 12);
  l.pp = 11;
  m.global_batch = 11;
  EXPECT_TRUE(why_invalid(l, m, 11).empty()) << why_invalid(l, m, 11);
  // More stages than blocks, as the trainer runs them: the embedding, the
  // final norm and the head are layers of its list too.
  l.pp = 73;
  m.global_batch = 73;
  EXPECT_TRUE(why_invalid(l, m, 73).empty()) << why_invalid(l, m, 73);
  l.pp = 74;
  m.global_batch = 74;
  EXPECT_NE(why_invalid(l, m, 74).find("pp=74 is more than the 73 layers the model is cut from"), std::string::npos)
      << why_invalid(l, m, 74);
  l.pp = 12;
  l.virtual_stages = 2;
  l.schedule = Schedule::interleaved;
  m.global_batch = 24;
  EXPECT_NE(why_invalid(l, m, 12).find("does not divide layers=70 (interleaved chunks are even)"),
            std::string::npos);
  l.virtual_stages = 1;
  l.schedule = Schedule::one_f_one_b;
  m.global_batch = 12;
  // The second stage holds a block more than the first and one micro-batch fewer.
  l.pp = 12;
  const MemoryBreakdown most = memory_per_device(m, l, kHalf);
  EXPECT_GT(most.activations, 0);
}

DeviceSpec unit_device() {
  DeviceSpec d;
  d.type = "test";
  d.peak_flops = 100;
  d.memory_bytes = 1e12;
  d.memory_bandwidth_bytes_per_s = 10;
  d.gemm_efficiency = 0.5;
  d.gemm_half_dim = 10;
  return d;
}

TEST(MemoryFormulas, MoreStagesThanBlocksAsTheTrainerCutsThem) {
  // 2 blocks on 4 stages: the trainer's default partition (parameters)
  // gives the embedding and the final norm with the head stages of their
  // own; on 5 the final norm and the head are apart.
  ModelSpec m = small_model();
  m.global_batch = 8;
  auto blocks_of = [&](int pp) {
    std::vector<int64_t> blocks;
    for (int s = 0; s < pp; ++s) blocks.push_back(stage_blocks(m, pp, s));
    return blocks;
  };
  EXPECT_EQ(blocks_of(3), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(blocks_of(4), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(blocks_of(5), (std::vector<int64_t>{0, 1, 1, 0, 0}));
  // Such a layout is costed: the pipeline's stages hold the embedding, a
  // block each, and the head.
  Layout l;
  l.pp = 4;
  l.dp = 1;
  l.micro_batch = 1;
  ASSERT_TRUE(why_invalid(l, m, 4).empty()) << why_invalid(l, m, 4);
  const Estimate e = estimate_layout(m, cluster_preset("a100-80g-ib").resolved(), l, {});
  EXPECT_GT(e.time.step_s, 0);
  EXPECT_GT(e.memory.total(), 0);
}

TEST(ComputeFormulas, GemmRateCurve) {
  const DeviceSpec d = unit_device();
  // 0.5 * 100 / (1 + 10/10 + 10/20 + 10/40) = 50 / 2.75
  EXPECT_DOUBLE_EQ(gemm_flops_per_s(d, 10, 20, 40), 50 / 2.75);
  EXPECT_DOUBLE_EQ(gemm_seconds(d, 10, 20, 40, 3), 3 * 2 * 8000 / (50 / 2.75));
  EXPECT_NEAR(gemm_flops_per_s(d, 1e12, 1e12, 1e12), 50, 1e-6);
  // A fixed time per call, once for a batch (one batched product).
  DeviceSpec slow_calls = d;
  slow_calls.gemm_overhead_s = 7;
  EXPECT_DOUBLE_EQ(gemm_seconds(slow_calls, 10, 20, 40, 3), gemm_seconds(d, 10, 20, 40, 3) + 7);
  EXPECT_DOUBLE_EQ(gemm_seconds(slow_calls, 0, 20, 40), 0);
}

TEST(ComputeFormulas, OptimizerStreamsTheFp32StateAndTheGradient) {
  const DeviceSpec d = unit_device();  // 10 B/s
  // Weight (or master), two moments read and written 24; gradient 2; compute copy written 2.
  EXPECT_DOUBLE_EQ(optimizer_seconds(d, 10, kHalf), 28);
  EXPECT_DOUBLE_EQ(optimizer_seconds(d, 10, kMixed), 24 + 4 + 2);
  EXPECT_DOUBLE_EQ(optimizer_seconds(d, 10, kFloat), 24 + 4);
}

TEST(ComputeFormulas, BackwardIsTwiceForwardPlusRecomputation) {
  const ModelSpec m = small_model();
  const DeviceSpec d = unit_device();
  Layout l;
  const LayerTimes plain = layer_compute_times(m, d, l);
  EXPECT_NEAR(plain.backward_s, 2 * plain.forward_s, 1e-12);
  l.recompute = Recompute::full;
  const LayerTimes full = layer_compute_times(m, d, l);
  EXPECT_NEAR(full.backward_s, 3 * full.forward_s, 1e-12);
  l.recompute = Recompute::selective;
  const LayerTimes selective = layer_compute_times(m, d, l);
  EXPECT_GT(selective.backward_s, plain.backward_s);
  EXPECT_LT(selective.backward_s, full.backward_s);
  // Elementwise part: 2 x activation bytes / bandwidth.
  const double ew = 2 * layer_activation_bytes(m, 1, 1, false, Recompute::none, 2) / 10;
  EXPECT_NEAR(plain.forward_s - plain.forward_gemm_s, ew, 1e-9);
}

TEST(ComputeFormulas, ElementwiseAtTheCalibratedRateInTheTrainingDtype) {
  const ModelSpec m = small_model();  // s b h = 32 at mb 1; 5 a s / h = 5
  DeviceSpec d = unit_device();       // defaults: memory bandwidth 10 B/s, 2-byte elements
  EXPECT_DOUBLE_EQ(d.elementwise_bandwidth(), 10);
  EXPECT_DOUBLE_EQ(d.element_bytes(), 2);
  d.elementwise_bytes_per_s = 4;
  d.dtype_bytes = 4;
  Layout l;
  // Activations 32 (34 + 5) = 1248 bytes at 2 bytes an element, written and
  // read: 2 x 1248 x (4 / 2) bytes at 4 B/s = 1248 s; backward twice.
  const LayerTimes layer = layer_compute_times(m, d, l);
  EXPECT_NEAR(layer.forward_s - layer.forward_gemm_s, 1248, 1e-9);
  EXPECT_NEAR(layer.backward_s - 2 * layer.forward_gemm_s, 2 * 1248, 1e-9);
  // Logits of 4 tokens x 16: the loss moves (4 + 4) x 2 bytes each, 1024 B
  // = 256 s, half forward and half backward; the final norm reads and writes
  // 4 x 8 hidden states of 4 bytes, 256 B = 64 s forward, 128 s backward.
  const LayerTimes logits = logit_compute_times(m, d, l);
  const double gemm = gemm_seconds(d, 4, 16, 8);
  EXPECT_DOUBLE_EQ(logits.forward_gemm_s, gemm);
  EXPECT_NEAR(logits.forward_s, gemm + 128 + 64, 1e-9);
  EXPECT_NEAR(logits.backward_s, 2 * gemm + 128 + 128, 1e-9);
  // Embedding: 4 x 32 elements of 4 bytes = 512 B = 128 s forward, 256 s backward.
  const LayerTimes embedding = embedding_compute_times(m, d, l);
  EXPECT_DOUBLE_EQ(embedding.forward_s, 128);
  EXPECT_DOUBLE_EQ(embedding.backward_s, 256);
  EXPECT_DOUBLE_EQ(embedding.forward_gemm_s, 0);
  // The optimizer streams at memory bandwidth, not the elementwise rate.
  EXPECT_DOUBLE_EQ(optimizer_seconds(d, 10, kFloat), 28);
  // Uncalibrated (GPU presets): the elementwise rate is the memory
  // bandwidth and elements are 2 bytes: loss 4 x 16 x 6 x 2 / 10, norm 2 x 32 x 2 / 10.
  const DeviceSpec plain = unit_device();
  const LayerTimes plain_logits = logit_compute_times(m, plain, l);
  EXPECT_NEAR(plain_logits.forward_s, gemm + 76.8 / 2 + 12.8, 1e-9);
  EXPECT_NEAR(embedding_compute_times(m, plain, l).forward_s, 4 * 32 * 2 / 10.0, 1e-12);
}

TEST(CostFormulas, TensorParallelCollectivesCountTheEmbeddingAndTheLogitInput) {
  ModelSpec m = small_model();  // 2 layers, b s h = 4 x 4 x 8 = 128 elements at mb 4
  ClusterSpec c;
  c.hosts = 1;
  c.devices_per_host = 2;
  c.device = unit_device();
  c.device.dtype_bytes = 4;
  c.intra_host = LinkSpec{Transport::shm, 1e9, 1e-5, 1};
  c.inter_host = c.intra_host;
  Layout l;
  l.tp = 2;
  l.micro_batch = 4;  // one micro-batch of the global batch of 4
  const Estimate e = estimate_layout(m, c.resolved(), l);
  const GroupLink tp = group_link(c.resolved(), l, Axis::tp);
  // Per layer 2 allreduces forward and 2 backward of b s h elements of 4
  // bytes; the embedding's output forward and the logit input's gradient
  // backward; the cross entropy's 3 allreduces of b s floats.
  const double activation = allreduce_seconds(128 * 4, tp), loss = allreduce_seconds(4 * 4 * 4, tp);
  EXPECT_NEAR(e.time.tp_comm_s, (2 * 4 + 2) * activation + 3 * loss, 1e-15);
  // With 2-byte elements the activations' allreduces move half the bytes.
  c.device.dtype_bytes = 2;
  const Estimate half = estimate_layout(m, c.resolved(), l);
  EXPECT_NEAR(half.time.tp_comm_s, 10 * allreduce_seconds(128 * 2, tp) + 3 * loss, 1e-15);
}

TEST(CostFormulas, ThePipelineStepIsTheSimulatedScheduleOfTheStageCosts) {
  // What giant plan --show-schedule draws is what the step's pipeline part is.
  const ClusterSpec c = cluster_preset("v100-tcp").resolved();
  const ModelSpec m = model_preset("gpt-13b");
  for (const char* text : {"tp=4,pp=4,dp=2,mb=4,schedule=1f1b,zero=0,recompute=full,sp=0",
                           "tp=2,pp=4,dp=4,mb=2,schedule=interleaved,v=2,zero=1,recompute=none,sp=0",
                           "tp=8,pp=2,dp=2,mb=4,schedule=gpipe,zero=0,recompute=full,sp=0"}) {
    const LayoutFilter f = parse_layout_filter(text);
    Layout l;
    l.tp = *f.tp, l.pp = *f.pp, l.dp = *f.dp, l.micro_batch = *f.micro_batch, l.schedule = *f.schedule;
    l.virtual_stages = f.virtual_stages.value_or(1), l.zero = *f.zero, l.recompute = *f.recompute;
    ASSERT_EQ(why_invalid(l, m, c.devices()), "") << text;
    const Estimate e = estimate_layout(m, c, l);
    const ActionCosts costs = pipeline_action_costs(m, c, l);
    ASSERT_EQ(costs.forward_s.size(), size_t(l.pp * l.virtual_stages));
    const SimulationResult pipeline = simulate_schedule(
        lower_communication(generate_schedule(pipeline_shape(l, l.micro_batches(m.global_batch)))), costs);
    // Without ZeRO-3 the step is the pipeline, then the gradient sync and the optimizer.
    EXPECT_NEAR(pipeline.step_s, e.time.step_s - e.time.dp_comm_s - e.time.optimizer_s, 1e-9 * e.time.step_s)
        << text;
    EXPECT_GT(costs.transfer_s, 0) << text;
  }
}

// Two CPU devices as `giant plan --calibrate` describes them: fp32 rates
// in [device], bf16 GEMMs 10x as fast in [device.bf16].
ClusterSpec calibrated_cpu_pair() {
  ClusterSpec c;
  c.name = "calibrated";
  c.hosts = 1;
  c.devices_per_host = 2;
  c.device.type = "cpu";
  c.device.peak_flops = 30e9;
  c.device.memory_bytes = 64e9;
  c.device.memory_bandwidth_bytes_per_s = 10e9;
  c.device.gemm_efficiency = 1;
  c.device.gemm_half_dim = 40;
  c.device.elementwise_bytes_per_s = 4e9;
  c.device.dtype_bytes = 4;
  PrecisionRates bf16;
  bf16.peak_flops = 300e9;
  bf16.gemm_efficiency = 1;
  bf16.gemm_half_dim = 60;
  bf16.elementwise_bytes_per_s = 3e9;
  c.device.precision_rates[Precision::bf16] = bf16;
  c.intra_host = LinkSpec{Transport::tcp, 2e9, 2e-5, 1};
  c.inter_host = c.intra_host;
  c.validate();
  return c.resolved();
}

ModelSpec bench_model() {  // bench/train's GPT: 4 layers, hidden 256, sequence 128, batch 16
  ModelSpec m;
  m.name = "bench";
  m.layers = 4;
  m.hidden = 256;
  m.heads = 4;
  m.seq_len = 128;
  m.vocab = 512;
  m.global_batch = 16;
  return m;
}

Layout two_replicas_of_8() {  // dp 2, one micro-batch of 8 each (the bench model's batch)
  Layout l;
  l.dp = 2;
  l.micro_batch = 8;
  return l;
}

TEST(CostFormulas, TheRunsPrecisionPicksTheRatesAndTheBytes) {
  const ClusterSpec c = calibrated_cpu_pair();
  const ModelSpec m = bench_model();
  Layout l = two_replicas_of_8();
  CostOptions options;
  options.engine.bucket_bytes = 1e12;  // one bucket: the whole sync is exposed
  options.precision = kFloat;
  const Estimate fp32 = estimate_layout(m, c, l, options);
  options.precision = kMixed;
  const Estimate bf16 = estimate_layout(m, c, l, options);
  EXPECT_EQ(bf16.precision.compute, Precision::bf16);
  EXPECT_EQ(bf16.precision.gradients, Precision::fp32);
  EXPECT_LT(bf16.time.step_s, fp32.time.step_s);
  EXPECT_LT(bf16.time.compute_s, fp32.time.compute_s / 3);
  // MFU against the peak of the dtype computed in.
  EXPECT_NEAR(fp32.mfu, fp32.model_tflops_per_device * 1e12 / 30e9, 1e-12);
  EXPECT_NEAR(bf16.mfu, bf16.model_tflops_per_device * 1e12 / 300e9, 1e-12);
  // Each layer's GEMMs at the dtype's curve, its elementwise work in 2-byte
  // elements at the bf16 elementwise rate.
  const DeviceSpec device = c.device.in_precision(Precision::bf16);
  const LayerTimes layer = layer_compute_times(m, device, l);
  EXPECT_NEAR(layer.forward_s - layer.forward_gemm_s,
              2 * layer_activation_bytes(m, 8, 1, false, Recompute::none, 2) / 3e9, 1e-12);
  EXPECT_NEAR(layer.forward_gemm_s, gemm_seconds(device, 8 * 128, 3 * 256, 256) + gemm_seconds(device, 8 * 128, 256, 256) +
                                        gemm_seconds(device, 8 * 128, 1024, 256) + gemm_seconds(device, 8 * 128, 256, 1024) +
                                        gemm_seconds(device, 128, 128, 64, 8 * 4) + gemm_seconds(device, 128, 64, 128, 8 * 4),
              1e-12);
  // The gradients are reduced in their dtype: fp32 in both runs, bf16 halves them.
  const GroupLink dp = group_link(c, l, Axis::dp);
  EXPECT_NEAR(fp32.time.dp_comm_s, allreduce_seconds(fp32.memory.parameters * 4, dp), 1e-12);
  EXPECT_NEAR(bf16.time.dp_comm_s, fp32.time.dp_comm_s, 1e-12);
  options.precision = RunPrecision{Precision::bf16, Precision::bf16};
  const Estimate half = estimate_layout(m, c, l, options);
  EXPECT_NEAR(half.time.dp_comm_s, allreduce_seconds(half.memory.parameters * 2, dp), 1e-12);
  // Memory: fp32 activations are twice bf16's; model states 16 and 18 bytes a parameter.
  EXPECT_NEAR(fp32.memory.activations, 2 * bf16.memory.activations, 1e-6);
  EXPECT_DOUBLE_EQ(fp32.memory.model_states, 16 * fp32.memory.parameters);
  EXPECT_DOUBLE_EQ(bf16.memory.model_states, 18 * bf16.memory.parameters);
  // No precision asked for (one bucket again): the dtype of the [device] rates (fp32 here) throughout.
  CostOptions defaults;
  defaults.engine.bucket_bytes = options.engine.bucket_bytes;
  const Estimate plain = estimate_layout(m, c, l, defaults);
  EXPECT_EQ(plain.precision.compute, Precision::fp32);
  EXPECT_DOUBLE_EQ(plain.time.step_s, fp32.time.step_s);
}

TEST(CostFormulas, ZeroOneGathersTheComputeCopy) {
  const ClusterSpec c = calibrated_cpu_pair();
  const ModelSpec m = bench_model();
  Layout l = two_replicas_of_8();
  l.zero = 1;
  CostOptions options;
  options.engine.bucket_bytes = 1e12;  // one bucket: the whole sync is exposed
  options.precision = kMixed;
  const Estimate e = estimate_layout(m, c, l, options);
  // Reduce-scatter of fp32 gradients, allgather of bf16 weights: a ring
  // allreduce's traffic at 3 bytes an element.
  EXPECT_NEAR(e.time.dp_comm_s, allreduce_seconds(e.memory.parameters * 3, group_link(c, l, Axis::dp)), 1e-12);
  // The optimizer updates half the parameters at 30 bytes each.
  EXPECT_NEAR(e.time.optimizer_s, e.memory.parameters / 2 * 30 / 10e9, 1e-15);
}

// The trainer's buckets of parallel.bucket_mb are each reduced once the
// backward has produced them: of a sync S over B buckets behind a backward
// T, max(S - T + T/B, S/B) stays exposed.
TEST(CostFormulas, GradientBucketsHideBehindTheBackwardThatProducesThem) {
  const ClusterSpec c = calibrated_cpu_pair();
  const ModelSpec m = bench_model();
  Layout l = two_replicas_of_8();
  CostOptions options;
  options.precision = kFloat;
  options.engine.bucket_bytes = 1e12;
  const Estimate one = estimate_layout(m, c, l, options);
  const double sync = allreduce_seconds(one.memory.parameters * 4, group_link(c, l, Axis::dp));
  EXPECT_NEAR(one.time.dp_comm_s, sync, 1e-12);
  const double backward = pipeline_action_costs(m, c, l, options).backward_s[0];
  for (const double buckets : {2.0, 4.0, 64.0}) {
    options.engine.bucket_bytes = one.memory.parameters * 4 / buckets;
    const Estimate e = estimate_layout(m, c, l, options);
    EXPECT_NEAR(e.time.dp_comm_s, std::max(sync - backward + backward / buckets, sync / buckets), 1e-9 * sync)
        << buckets << " buckets";
    EXPECT_LT(e.time.dp_comm_s, sync);
    EXPECT_NEAR(e.time.step_s, one.time.step_s - one.time.dp_comm_s + e.time.dp_comm_s, 1e-9 * sync);
  }
}

// ccl reduces a dp group spanning shared-memory hosts inside each host first
// (1.5x fewer bytes between 2 hosts of 2 than a flat ring): the sync costs
// its choice; DeepSpeed's flat allreduce the ring.
// Two hosts of calibrated_cpu_pair's ranks, sharing memory inside, the
// link between them as given.
ClusterSpec two_hosts_of_two(double link_bytes_per_s, double link_latency_s) {
  ClusterSpec c = calibrated_cpu_pair();
  c.hosts = 2;
  c.intra_host = LinkSpec{Transport::shm, 8e9, 2e-6, 1};
  c.inter_host = LinkSpec{Transport::tcp, link_bytes_per_s, link_latency_s, 1};
  c.validate();
  return c;
}

TEST(CostFormulas, DataParallelSyncCostsCclsHierarchicalAllreduceAcrossHosts) {
  const ClusterSpec c = two_hosts_of_two(1e8, 5e-5).resolved();
  const ModelSpec m = bench_model();
  Layout l;  // dp 4 over the 2 hosts, the same 8 sequences per pair of ranks
  l.dp = 4;
  l.micro_batch = 4;
  CostOptions options;
  options.precision = kFloat;
  options.engine.bucket_bytes = 1e12;  // one bucket: the whole sync is exposed
  const GroupLink dp = group_link(c, l, Axis::dp);
  ASSERT_TRUE(dp.crosses_hosts);
  const Estimate giant = estimate_layout(m, c, l, options);
  const double bytes = giant.memory.parameters * 4;
  EXPECT_NEAR(giant.time.dp_comm_s, ccl_allreduce_seconds(bytes, c, dp), 1e-12);
  EXPECT_LT(giant.time.dp_comm_s, allreduce_seconds(bytes, dp));
  options.engine.deepspeed = true;
  options.engine.deepspeed_reduce_bucket_elements = 1e12;
  const Estimate deepspeed = estimate_layout(m, c, l, options);
  EXPECT_NEAR(deepspeed.time.dp_comm_s, allreduce_seconds(bytes, dp), 1e-12);
}

TEST(CostFormulas, ZeroThreeGathersHideBehindComputeOnlyWhenPrefetched) {
  const ClusterSpec c = calibrated_cpu_pair();
  const ModelSpec m = bench_model();
  Layout l = two_replicas_of_8();
  l.zero = 1;
  CostOptions options;
  options.precision = kFloat;
  const Estimate one = estimate_layout(m, c, l, options);
  l.zero = 3;
  const Estimate three = estimate_layout(m, c, l, options);
  // ZeRO-3's per-layer collectives on top of compute, at least the first
  // gather of each pass and the last reduce-scatter.
  EXPECT_GT(three.time.step_s, one.time.step_s - one.time.dp_comm_s);
  EXPECT_GT(three.time.dp_comm_s, 0);
  options.engine.zero3_prefetch = 0;
  const Estimate unprefetched = estimate_layout(m, c, l, options);
  EXPECT_GT(unprefetched.time.step_s, three.time.step_s);
  // DeepSpeed's per-tensor collectives cost more latency than giant's per-layer ones.
  options.engine = ZeroEngine{};
  options.engine.deepspeed = true;
  EXPECT_GT(estimate_layout(m, c, l, options).time.step_s, three.time.step_s);
  // Full recomputation: one more forward per block in backward.
  l.zero = 1;
  options.engine = ZeroEngine{};
  l.recompute = Recompute::full;
  const Estimate full = estimate_layout(m, c, l, options);
  EXPECT_GT(full.time.compute_s, one.time.compute_s);
  EXPECT_LT(full.memory.activations, one.memory.activations);
}

TEST(CommFormulas, OneRingAcrossHostsGetsOneDevicesShareOfTheNetwork) {
  ClusterSpec c = cluster_preset("a100-80g-ib").resolved();
  Layout l;
  l.dp = c.devices();
  const GroupLink group = group_link(c, l, Axis::dp);
  ASSERT_TRUE(group.crosses_hosts);
  const GroupLink ring = single_ring_link(c, group);
  EXPECT_DOUBLE_EQ(ring.bandwidth_bytes_per_s, c.inter_host.effective_bandwidth() / c.devices_per_host);
  EXPECT_DOUBLE_EQ(ring.latency_s, group.latency_s);
  l.dp = 8, l.tp = 1;
  c.hosts = 1;
  EXPECT_DOUBLE_EQ(single_ring_link(c, group_link(c, l, Axis::dp)).bandwidth_bytes_per_s,
                   group_link(c, l, Axis::dp).bandwidth_bytes_per_s);
}

TEST(CommFormulas, ZeroMovementIsHierarchicalWhereCclRunsItOverSharedMemory) {
  // 2 hosts x 2 CPU ranks on a slow link: ccl reduce-scatters and gathers
  // through shm inside a host and one ring of hosts per local rank, so half
  // the bytes cross at the host's rate, not 3/4 at one device's share.
  ClusterSpec c = cluster_preset("v100-tcp");
  c.hosts = 2;
  c.devices_per_host = 2;
  c.intra_host.transport = Transport::shm;
  c.inter_host.bandwidth_bytes_per_s = 2.5e6;
  c = c.resolved();
  Layout l;
  l.dp = 4;
  const GroupLink group = group_link(c, l, Axis::dp);
  const double bytes = 8e6, host_rate = c.inter_host.effective_bandwidth();
  const double ccl_s = zero_movement_seconds(bytes, c, group, true);
  EXPECT_NEAR(ccl_s, 0.5 * bytes / host_rate, 0.02 * ccl_s);
  EXPECT_DOUBLE_EQ(zero_movement_seconds(bytes, c, group, false),
                   reduce_scatter_seconds(bytes, single_ring_link(c, group)));
  EXPECT_NEAR(zero_movement_seconds(bytes, c, group, false), 0.75 * bytes / (host_rate / 2), 0.02 * ccl_s * 3);
  // NVLink hosts (the published clusters) keep the single ring.
  c.intra_host.transport = Transport::nvlink;
  EXPECT_DOUBLE_EQ(zero_movement_seconds(bytes, c, group, true),
                   reduce_scatter_seconds(bytes, single_ring_link(c, group)));
}

// The trainer gives its groups' ccl the cluster's links (with_cluster_links),
// so that ccl's own choice is the one the planner costs: on a 10 Mbit/s
// link between 2 hosts of 2 shared-memory ranks the hierarchical allreduce
// of a 1 MiB bucket, where ccl's defaults (a 10 Gbit/s-class link) choose
// the flat ring, which sends 1.5x the bytes between hosts.
TEST(CommFormulas, CclChoosesOnTheClustersLinksWhatThePlannerCosts) {
  const ClusterSpec c = two_hosts_of_two(1.25e6, 3e-4);
  const ccl::CommConfig defaults;
  const ccl::CommConfig linked = with_cluster_links(defaults, c);
  EXPECT_DOUBLE_EQ(linked.tcp_gbps, 1.25e6 / 1e9);
  EXPECT_DOUBLE_EQ(linked.tcp_alpha_us, 300);
  EXPECT_DOUBLE_EQ(linked.shm_gbps, 8);
  EXPECT_DOUBLE_EQ(linked.shm_alpha_us, 2);
  EXPECT_EQ(linked.segment_bytes, defaults.segment_bytes);  // only the link model changes

  const ccl::GroupShape two_by_two{4, 2, 2, true};
  const double bucket = 1 << 20;
  EXPECT_EQ(ccl::choose_allreduce(two_by_two, ccl::CostModel::from(defaults), bucket).algorithm,
            ccl::Algorithm::ring);
  const ccl::AlgorithmCost chosen = ccl::choose_allreduce(two_by_two, ccl::CostModel::from(linked), bucket);
  EXPECT_EQ(chosen.algorithm, ccl::Algorithm::hierarchical);
  Layout l;
  l.dp = 4;
  EXPECT_NEAR(chosen.seconds, ccl_allreduce_seconds(bucket, c.resolved(), group_link(c.resolved(), l, Axis::dp)),
              1e-12);

  // One host: TCP is the intra-host link only where the ranks use it.
  ClusterSpec one_host = c;
  one_host.hosts = 1;
  EXPECT_DOUBLE_EQ(with_cluster_links(defaults, one_host).tcp_gbps, defaults.tcp_gbps);
  one_host.intra_host.transport = Transport::tcp;
  EXPECT_DOUBLE_EQ(with_cluster_links(defaults, one_host).tcp_gbps, 8);
  EXPECT_DOUBLE_EQ(with_cluster_links(defaults, one_host).shm_gbps, defaults.shm_gbps);
}

TEST(CommFormulas, AlphaBetaOfRingAndHalvingDoubling) {
  GroupLink g;
  g.size = 4;
  g.bandwidth_bytes_per_s = 1e9;
  g.latency_s = 1e-5;
  // Ring (above 256 KiB): 2(n-1) steps, 2(n-1)/n bytes.
  EXPECT_DOUBLE_EQ(allreduce_seconds(1e6 * 4, g), 6 * 1e-5 + 1.5 * 4e6 / 1e9);
  // Halving-doubling: 2 log2 n steps.
  EXPECT_DOUBLE_EQ(allreduce_seconds(1000, g), 4 * 1e-5 + 1.5 * 1000 / 1e9);
  EXPECT_DOUBLE_EQ(reduce_scatter_seconds(4e6, g), 3e-5 + 0.75 * 4e6 / 1e9);
  EXPECT_DOUBLE_EQ(point_to_point_seconds(1e6, g), 1e-5 + 1e-3);
  g.size = 1;
  EXPECT_EQ(allreduce_seconds(1e6, g), 0);
}

TEST(CommFormulas, PlacementDecidesTheLink) {
  ClusterSpec c = cluster_preset("v100-tcp").resolved();  // 4 hosts x 8
  Layout l;
  l.tp = 8, l.pp = 2, l.dp = 2;
  GroupLink tp = group_link(c, l, Axis::tp);
  EXPECT_FALSE(tp.crosses_hosts);
  EXPECT_DOUBLE_EQ(tp.bandwidth_bytes_per_s, 150e9 * kCollectiveGoodputRatio);
  GroupLink dp = group_link(c, l, Axis::dp);  // stride 8: one member per host, 8 rings share the NIC
  EXPECT_TRUE(dp.crosses_hosts);
  EXPECT_EQ(dp.members_per_host, 1);
  EXPECT_DOUBLE_EQ(dp.bandwidth_bytes_per_s, 12.5e9 * kTcpGoodputRatio * kCollectiveGoodputRatio / 8);
  EXPECT_DOUBLE_EQ(dp.latency_s, 30e-6);
  l.order = {Axis::dp, Axis::tp, Axis::pp};  // dp fastest: inside a host
  EXPECT_FALSE(group_link(c, l, Axis::dp).crosses_hosts);
  l.tp = 4, l.dp = 4, l.pp = 2;
  l.order = {Axis::tp, Axis::dp, Axis::pp};  // dp stride 4: 2 per host, 4 rings per NIC
  dp = group_link(c, l, Axis::dp);
  EXPECT_EQ(dp.members_per_host, 2);
  EXPECT_DOUBLE_EQ(dp.bandwidth_bytes_per_s, 12.5e9 * kTcpGoodputRatio * kCollectiveGoodputRatio / 4);
}

TEST(LinkEfficiency, TcpFromMeasuredGoodput) {
  // The reference's veth: 956 Mbit/s goodput at 1 Gbit/s.
  EXPECT_NEAR(kTcpGoodputRatio, 0.956, 0.001);
  EXPECT_NEAR(default_link_efficiency(Transport::tcp), 0.956 * 1.56 / 1.6, 0.001);
  EXPECT_DOUBLE_EQ(default_link_efficiency(Transport::rdma), 1.56 / 1.6);
}

}  // namespace
}  // namespace giant::planner
